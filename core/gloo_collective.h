// GlooCollective: the tensor-parallel group over Gloo's TCP transport (Debian libgloo-dev), for the
// CPU backend and, staged through pinned host memory, for GPU tensors (two processes on one GPU,
// which NCCL refuses, or machines without working NCCL networking). Ranks meet through a
// RendezvousStore; every operation has a deadline, so a dead or hung peer fails it (Unavailable)
// within the timeout instead of hanging, and the group is then spent: every later operation fails
// at once until a new group is built. Sums are Gloo's ring all-reduce: the same bits on every rank.
// Joining a group sets SIGPIPE to ignored when it is at its default (a dead peer's socket must
// fail a write, not kill the process).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "core/rendezvous_store.h"

namespace gloo {
class Context;
}

namespace sparkserve::core {

struct GlooOptions {
  int32_t rank = 0;
  int32_t world = 1;
  // An address of this machine that every other rank can reach (the group's TCP listener binds
  // it; a port is picked). Not 0.0.0.0: it is published to the others as is.
  std::string host = "127.0.0.1";
  // Deadline of every operation.
  std::chrono::milliseconds timeout{3000};
  // Deadline of joining (the ranks start their set-up one after another, and a node may still be
  // loading its shard): at least `timeout`.
  std::chrono::milliseconds connect_timeout{15000};
};

class GlooCollective : public Collective {
 public:
  // Joins the group: publishes this rank's addresses in `store`, waits for the others' and
  // connects to them (every rank calls it; all must use the same world and a fresh store).
  // Errors: DeadlineExceeded / Unavailable naming what failed.
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Create(const GlooOptions& options, RendezvousStore& store);
  ~GlooCollective() override;

  int32_t rank() const override { return options_.rank; }
  int32_t world() const override { return options_.world; }
  absl::Status AllReduceSum(std::span<float> data) override;
  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override;
#ifdef SPARKSERVE_WITH_CUDA
  absl::Status AllReduceSumDevice(float* data, size_t count, void* stream) override;
  absl::Status AllGatherDevice(const float* local, size_t count, float* out, void* stream) override;
#endif
  std::string transport() const override;
  // Whether an operation failed (the group cannot be used again).
  bool failed() const { return !error_.ok(); }

 private:
  GlooCollective(const GlooOptions& options, std::shared_ptr<gloo::Context> context);
  // Runs a Gloo operation: exceptions (peer gone, deadline) become Unavailable and spend the group.
  template <typename Fn>
  absl::Status Guard(const char* what, size_t bytes, Fn&& fn);
  // Equal-length gather: out = world * local.size() floats, rank-major.
  absl::Status AllGatherFixed(const float* local, size_t count, float* out);

  GlooOptions options_;
  std::shared_ptr<gloo::Context> context_;
  absl::Status error_;
  uint64_t ops_ = 0;
#ifdef SPARKSERVE_WITH_CUDA
  struct Staging;
  // Pinned host memory of at least `floats`, once the previous copy up from it has finished.
  absl::StatusOr<float*> HostStaging(size_t floats);
  std::unique_ptr<Staging> staging_;  // pinned host buffers + the event of the last copy up
#endif
};

}  // namespace sparkserve::core
