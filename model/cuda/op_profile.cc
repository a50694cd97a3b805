// CudaModelRunner's op profile (ProfileNextStep): an event after each op of one step, summed by op
// (with tensor parallelism "all_reduce" is its own op: the time from the partial sum's linear to
// the summed result, waiting for the slowest rank included).
#include "model/cuda/cuda_model_runner.h"

#include <map>
#include <string>

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::model::cuda {

absl::Status CudaModelRunner::Mark(const std::string& op) {
  if (!profiling_) return absl::OkStatus();
  cudaEvent_t e = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  op_marks_.emplace_back(op, e);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capturing));
  // Inside a stream capture a plain record only orders work; an external one keeps its timestamp.
  CUDA_RETURN_IF_ERROR(capturing == cudaStreamCaptureStatusActive
                           ? cudaEventRecordWithFlags(e, stream_, cudaEventRecordExternal)
                           : cudaEventRecord(e, stream_));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::CollectOpProfile() {
  RETURN_IF_ERROR(Sync());
  std::map<std::string, size_t> index;
  op_profile_.clear();
  for (size_t i = 1; i < op_marks_.size(); ++i) {
    float ms = 0;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, op_marks_[i - 1].second, op_marks_[i].second));
    const std::string& op = op_marks_[i].first;
    auto [it, fresh] = index.emplace(op, op_profile_.size());
    if (fresh) op_profile_.push_back({op, 0, 0});
    op_profile_[it->second].micros += 1e3 * ms;
    op_profile_[it->second].count += 1;
  }
  for (auto& [op, e] : op_marks_) cudaEventDestroy(e);
  op_marks_.clear();
  profiling_ = false;
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
