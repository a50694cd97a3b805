// NcclCollective: the tensor-parallel group over NCCL on CUDA device buffers (one rank per GPU;
// DESIGN.md §1, §5), for the CUDA runner across GPUs and machines. The communicator is
// non-blocking (ncclCommInitRankConfig, blocking = 0): joining, every enqueue and every wait for a
// step's device work are bounded, a peer's failure reported by NCCL (ncclCommGetAsyncError) or a
// deadline aborts the communicator (ncclCommAbort, which also ends kernels stuck waiting for a dead
// peer) and fails the call, so a dead or hung peer never hangs a rank. Once aborted the group is
// spent: every later call fails at once, until a new group is built.
// NCCL (libnccl.so.2) is loaded at run time, when the first group is made: binaries and bundles run
// without it, and say so when it is needed. SPARKSERVE_NCCL_LIBRARY names the library file when it
// is not on the loader's path (e.g. the one in PyTorch's nvidia-nccl wheel); otherwise the loader's
// path is tried, then the libnccl.so.2 the build found (CUDA toolkits that ship NCCL in their lib/).
// NVLink multicast (NVLS) is turned off (NCCL_NVLS_ENABLE=0) unless the environment sets it: a
// two- or four-rank tensor-parallel all-reduce does not need it, and on shared NVSwitch hosts it can
// take the GPUs out of service. NCCL_DEBUG=INFO logs the transport NCCL picked (P2P/NVLink,
// P2P/IPC, NET/IB, NET/Socket); cluster-check's bandwidth figures tell a fallback to sockets.
// Built only in CUDA builds where nccl.h was found (SPARKSERVE_WITH_NCCL).
//
// Making a group (every rank, each in its own process or thread, on its own GPU):
//   rank 0:  std::string id = *NcclCollective::NewUniqueId();   // 128 bytes, shipped to every rank
//   rank r:  auto nccl = NcclCollective::Create(r, world, id, /*device=*/N, std::chrono::seconds(10));
// Create returns when all `world` ranks have joined, or fails DeadlineExceeded after the timeout.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"

namespace sparkserve::core {

struct NcclOptions {
  int32_t rank = 0;
  int32_t world = 1;
  int32_t device = 0;     // this rank's CUDA device
  std::string unique_id;  // NcclCollective::NewUniqueId() of rank 0: the same bytes on every rank
  // Joining the group, and each operation's enqueue.
  std::chrono::milliseconds timeout{10000};
  // WaitDevice: the longest a step's device work may take before the group counts as hung (above
  // the longest prefill step; a peer that dies is usually reported by NCCL well before).
  std::chrono::milliseconds step_timeout{60000};
};

class NcclCollective : public Collective {
 public:
  // A fresh unique id (rank 0 makes it and sends the same bytes to every rank). Errors: NCCL
  // cannot be loaded, or ncclGetUniqueId fails (no usable network interface).
  static absl::StatusOr<std::string> NewUniqueId();
  // Joins the group: InvalidArgument on a bad rank/world/device/id or a timeout <= 0,
  // FailedPrecondition when NCCL or CUDA are unavailable, DeadlineExceeded when the others do not
  // all join within the timeout, InvalidArgument when NCCL calls the set-up invalid (two ranks on one
  // GPU), Unavailable when a peer failed the join, Internal for NCCL's other errors.
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Create(const NcclOptions& options);
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Create(int32_t rank, int32_t world,
                                                                std::string_view unique_id, int32_t device,
                                                                std::chrono::milliseconds timeout);
  // Checks Create's arguments without touching NCCL or CUDA (the first thing Create does).
  static absl::Status ValidateOptions(const NcclOptions& options);
  ~NcclCollective() override;

  int32_t rank() const override { return options_.rank; }
  int32_t world() const override { return options_.world; }
  // Host buffers: staged through device memory on the collective's own stream (waits).
  absl::Status AllReduceSum(std::span<float> data) override;
  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override;
  // Device buffers on the caller's stream (enqueued, not waited for; capturable into CUDA graphs).
  absl::Status AllReduceSumDevice(float* data, size_t count, void* stream) override;
  absl::Status AllGatherDevice(const float* local, size_t count, float* out, void* stream) override;
  absl::Status WaitDevice(void* stream) override;
  bool device_capturable() const override { return true; }
  std::string transport() const override;

  // Asks the group to stop (thread-safe, e.g. from the thread that sees a node's control stream
  // die): the call in progress, or the next one, aborts the communicator and fails Unavailable
  // with `reason`.
  void RequestAbort(std::string reason);
  // Whether the group was aborted (it cannot be used again).
  bool failed() const;

 private:
  struct Impl;
  NcclCollective(const NcclOptions& options, std::unique_ptr<Impl> impl);
  // OK, or the error that spent the group (aborting it first when an abort was requested).
  absl::Status CheckUsable();
  // After an enqueue call: waits (bounded) until the non-blocking communicator has taken it.
  absl::Status FinishEnqueue(int result, const char* what);
  // Aborts the communicator (once) and keeps `why` as the group's error.
  absl::Status Abort(absl::Status why);

  NcclOptions options_;
  std::unique_ptr<Impl> impl_;
  mutable std::mutex mu_;       // guards error_ and abort_reason_
  absl::Status error_;          // not OK once the group is spent
  std::string abort_reason_;
  std::atomic<bool> abort_requested_{false};
};

}  // namespace sparkserve::core
