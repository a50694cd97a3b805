// NcclGroups: how a process makes the ranks of NCCL groups: a fresh unique id (rank 0) and this
// rank's join. The real one uses core::NcclCollective (CUDA builds with NCCL; elsewhere both calls
// fail FailedPrecondition naming the build); tests of the cluster join protocol substitute a
// stand-in that needs no GPU.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "core/nccl_collective.h"

namespace sparkserve::core {

class NcclGroups {
 public:
  virtual ~NcclGroups() = default;
  // The bytes every rank of a new group is given (ncclGetUniqueId).
  virtual absl::StatusOr<std::string> NewUniqueId() = 0;
  // Joins the group of options.unique_id as options.rank on options.device: returns when all ranks
  // have joined (errors as NcclCollective::Create).
  virtual absl::StatusOr<std::unique_ptr<Collective>> Join(const NcclOptions& options) = 0;
};

// core::NcclCollective.
std::shared_ptr<NcclGroups> RealNcclGroups();

}  // namespace sparkserve::core
