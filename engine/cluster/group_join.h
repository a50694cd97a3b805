// JoinGroup: builds the data-plane group of the head (rank 0) and its nodes. Each node gets its
// setup over an InitCollective stream. Gloo: the rendezvous keys every rank publishes are relayed
// by the head to all the others (the head's own store is the hub), so the group needs no store
// server and no port beyond the collective's own. NCCL: the head makes the unique id and sends it
// in every setup (a fresh one for each group, so a re-sync never meets an old communicator).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "core/nccl_groups.h"
#include "engine/node_client.h"

namespace sparkserve::engine::cluster {

struct GroupMember {
  NodeClient* node = nullptr;
  int32_t rank = 1;
  std::string host;  // the node's address the other ranks connect to
};

enum class CollectiveKind { kGloo, kNccl };
const char* CollectiveName(CollectiveKind kind);  // "gloo", "nccl"

struct GroupOptions {
  CollectiveKind kind = CollectiveKind::kGloo;
  std::string head_host;                          // gloo: this machine's address the nodes connect to
  int32_t head_device = 0;                        // nccl: this process's CUDA device
  std::shared_ptr<core::NcclGroups> nccl;         // nccl: null is core::RealNcclGroups()
  std::chrono::milliseconds op_timeout{3000};     // every collective operation's deadline
  std::chrono::milliseconds join_timeout{30000};  // the whole set-up
};

// Every node of `members` and this process join one group of 1 + members.size() ranks. The errors
// name the node that failed (its own message when it could not join); a node's set-up error that no
// retry fixes (InvalidArgument, FailedPrecondition, Unimplemented: no NCCL there, two ranks on one
// GPU) keeps its code, other failures are Unavailable.
absl::StatusOr<std::unique_ptr<core::Collective>> JoinGroup(const std::vector<GroupMember>& members,
                                                           const GroupOptions& options);

}  // namespace sparkserve::engine::cluster
