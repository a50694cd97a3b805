// GPU token sampling: argument checks and workspace sizing around the kernel of sampling.cu.
#include "kernels/cuda/sampling.h"

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampling_kernels.h"

namespace sparkserve::kernels::cuda {

size_t SampleWorkspaceBytes(int rows, int vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  // The processed copy of each row (rows without banned ids, bias or penalties leave theirs unused).
  return static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);
}

absl::Status Sample(const SamplingInputs& in, const SamplingOutputs& out, void* workspace, cudaStream_t stream) {
  if (in.rows < 0) return absl::InvalidArgumentError(fmt::format("sampling: rows must be >= 0, got {}", in.rows));
  if (in.vocab < 1) return absl::InvalidArgumentError(fmt::format("sampling: vocab must be >= 1, got {}", in.vocab));
  if (in.rows == 0) return absl::OkStatus();
  if (in.logits == nullptr || in.params == nullptr) {
    return absl::InvalidArgumentError("sampling: logits and params must be device pointers, got null");
  }
  if (out.ids == nullptr || out.logprobs == nullptr || out.top_ids == nullptr || out.top_logprobs == nullptr ||
      out.status == nullptr) {
    return absl::InvalidArgumentError("sampling: every output (ids, logprobs, top_ids, top_logprobs, status) is needed");
  }
  if (workspace == nullptr) {
    return absl::InvalidArgumentError(fmt::format("sampling: a workspace of {} bytes is needed, got null",
                                                  SampleWorkspaceBytes(in.rows, in.vocab)));
  }
  return CudaStatus(LaunchSample(in, out, static_cast<float*>(workspace), stream), "sampling kernel");
}

absl::Status SelectCandidates(const SamplingInputs& in, int id_begin, int k, float* candidates, void* workspace,
                              cudaStream_t stream) {
  if (in.rows < 0) return absl::InvalidArgumentError(fmt::format("candidates: rows must be >= 0, got {}", in.rows));
  if (in.vocab < 1) return absl::InvalidArgumentError(fmt::format("candidates: vocab must be >= 1, got {}", in.vocab));
  if (k < 1 || k > kMaxGpuCandidates) {
    return absl::InvalidArgumentError(fmt::format("candidates: k must be in [1, {}], got {}", kMaxGpuCandidates, k));
  }
  if (id_begin < 0) return absl::InvalidArgumentError(fmt::format("candidates: id_begin must be >= 0, got {}", id_begin));
  if (in.rows == 0) return absl::OkStatus();
  if (in.logits == nullptr || in.params == nullptr || candidates == nullptr) {
    return absl::InvalidArgumentError("candidates: logits, params and the output must be device pointers, got null");
  }
  if (workspace == nullptr) {
    return absl::InvalidArgumentError(fmt::format("candidates: a workspace of {} bytes is needed, got null",
                                                  SampleWorkspaceBytes(in.rows, in.vocab)));
  }
  return CudaStatus(LaunchSelectCandidates(in, id_begin, k, candidates, static_cast<float*>(workspace), stream),
                    "candidates kernel");
}

}  // namespace sparkserve::kernels::cuda
