// Collective: the exchanges between the tensor-parallel ranks of one model (DESIGN.md §1, §5): the
// sum of partial outputs after o_proj / out_proj / down_proj and the gather of vocab-split rows, on
// host buffers (the CPU runner) or on the rank's own device ordered on a stream (the CUDA runner). Backends: one rank (no-op), an in-process group of
// threads (tests), Gloo over TCP (host buffers, and device buffers staged through the host), NCCL
// (device buffers). Results are identical on every rank.
#pragma once
#include <barrier>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace sparkserve::core {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t world() const = 0;
  // data = sum over ranks of data (same length on every rank).
  virtual absl::Status AllReduceSum(std::span<float> data) = 0;
  // out = concatenation of every rank's `local` in rank order (lengths may differ).
  virtual absl::Status AllGather(std::span<const float> local, std::vector<float>* out) = 0;

  // The same on `count` floats of this rank's CUDA device memory, enqueued on `stream` (a
  // cudaStream_t): AllGatherDevice's `out` holds world * count floats, rank-major. Backends
  // without a device path answer Unimplemented.
  virtual absl::Status AllReduceSumDevice(float* data, size_t count, void* stream) {
    return absl::UnimplementedError("this collective has no device path");
  }
  virtual absl::Status AllGatherDevice(const float* local, size_t count, float* out, void* stream) {
    return absl::UnimplementedError("this collective has no device path");
  }
  // A short human description of the transport (cluster-check, logs): "in-process", "gloo tcp ...".
  virtual std::string transport() const { return "in-process"; }

  // Whether the device methods only enqueue work on the stream (no host wait), so that a CUDA graph
  // may capture them (NCCL); a host-staged path answers false and the CUDA runner then replays its
  // graphs in segments with the collective called between them.
  virtual bool device_capturable() const { return false; }
  // Changes whenever the group under this collective is rebuilt: device work captured before (a
  // graph holding NCCL calls on the old communicator) must be captured again.
  virtual uint64_t group_epoch() const { return 0; }
  // Waits until the work enqueued on `stream` so far has finished, as long as the group allows: a
  // collective that can tell a dead or hung peer (NCCL's async errors and timeouts) fails instead of
  // hanging. The default is cudaStreamSynchronize (CUDA builds; FailedPrecondition otherwise).
  virtual absl::Status WaitDevice(void* stream);
};

// One rank: the sum is the data, the gather is a copy.
class SingleRankCollective : public Collective {
 public:
  int32_t rank() const override { return 0; }
  int32_t world() const override { return 1; }
  absl::Status AllReduceSum(std::span<float>) override { return absl::OkStatus(); }
  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override {
    out->assign(local.begin(), local.end());
    return absl::OkStatus();
  }
  absl::Status AllReduceSumDevice(float*, size_t, void*) override { return absl::OkStatus(); }
  bool device_capturable() const override { return true; }
  std::string transport() const override { return "single rank"; }
};

// A fixed (rank, world) whose backend is replaced when the group is rebuilt (a node lost, then
// re-synced): a runner keeps a pointer to it for its whole life. Without a backend every
// operation fails Unavailable. Replace only between operations (not thread-safe against them).
class ReplaceableCollective : public Collective {
 public:
  ReplaceableCollective(int32_t rank, int32_t world) : rank_(rank), world_(world) {}
  // `backend` must have this rank and world (InvalidArgument otherwise); null removes it.
  absl::Status Replace(std::unique_ptr<Collective> backend);
  Collective* backend() const { return backend_.get(); }

  int32_t rank() const override { return rank_; }
  int32_t world() const override { return world_; }
  absl::Status AllReduceSum(std::span<float> data) override;
  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override;
  absl::Status AllReduceSumDevice(float* data, size_t count, void* stream) override;
  absl::Status AllGatherDevice(const float* local, size_t count, float* out, void* stream) override;
  std::string transport() const override;
  bool device_capturable() const override;
  // Counts Replace() calls: graphs captured with the previous backend must be captured again.
  uint64_t group_epoch() const override { return epoch_; }
  absl::Status WaitDevice(void* stream) override;

 private:
  absl::Status NoBackend() const;
  int32_t rank_, world_;
  std::unique_ptr<Collective> backend_;
  uint64_t epoch_ = 0;
};

// How a host collective reaches device memory: CUDA copies on the caller's stream in CUDA builds;
// tests of the staging logic substitute host copies.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  virtual absl::Status Wait(void* stream) = 0;  // the stream's work so far has finished
  virtual absl::Status ToHost(const float* device, size_t count, float* host, void* stream) = 0;  // then waits
  virtual absl::Status ToDevice(const float* host, size_t count, float* device, void* stream) = 0;  // then waits
};
// CUDA copies (cudaMemcpyAsync + cudaStreamSynchronize); null in a build without CUDA.
std::shared_ptr<DeviceStaging> CudaDeviceStaging();

// N ranks as N threads of one process (each rank calls from its own thread, in lockstep). The
// device methods stage through host memory (copy down, the threads' barrier, the sum in rank
// order, copy up), so that N ranks can share one GPU in a test (NCCL refuses two ranks on one
// GPU); they are not capturable into CUDA graphs.
class InProcessGroup {
 public:
  // `staging`: how device buffers are read and written (default: CUDA copies; in a build without
  // CUDA the device methods then fail FailedPrecondition).
  explicit InProcessGroup(int32_t world, std::shared_ptr<DeviceStaging> staging = CudaDeviceStaging());
  ~InProcessGroup();
  Collective& rank(int32_t r) { return *ranks_[static_cast<size_t>(r)]; }

 private:
  class Rank;
  friend class Rank;
  int32_t world_;
  std::shared_ptr<DeviceStaging> staging_;
  std::barrier<> barrier_;
  std::vector<const float*> ptrs_;
  std::vector<size_t> sizes_;
  std::vector<std::unique_ptr<Collective>> ranks_;
};

}  // namespace sparkserve::core
