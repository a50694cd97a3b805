// RealNcclGroups (see nccl_groups.h): NcclCollective where the build has NCCL.
#include "core/nccl_groups.h"

namespace sparkserve::core {
namespace {

class RealGroups : public NcclGroups {
 public:
  absl::StatusOr<std::string> NewUniqueId() override {
#ifdef SPARKSERVE_WITH_NCCL
    return NcclCollective::NewUniqueId();
#else
    return NotBuilt();
#endif
  }
  absl::StatusOr<std::unique_ptr<Collective>> Join(const NcclOptions& options) override {
#ifdef SPARKSERVE_WITH_NCCL
    absl::StatusOr<std::unique_ptr<NcclCollective>> c = NcclCollective::Create(options);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Collective>(*std::move(c));
#else
    (void)options;
    return NotBuilt();
#endif
  }

 private:
  [[maybe_unused]] static absl::Status NotBuilt() {
    return absl::FailedPreconditionError(
        "this build has no NCCL (built without CUDA, or nccl.h was not found): use --collective gloo");
  }
};

}  // namespace

std::shared_ptr<NcclGroups> RealNcclGroups() { return std::make_shared<RealGroups>(); }

}  // namespace sparkserve::core
