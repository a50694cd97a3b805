// Token masks on the GPU: argument checks around the kernel of token_mask.cu.
#include "kernels/cuda/token_mask.h"

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/token_mask_kernels.h"

namespace sparkserve::kernels::cuda {

absl::Status ApplyTokenMasks(const TokenMaskInputs& in, cudaStream_t stream) {
  if (in.count < 0 || in.rows < 0 || in.vocab < 1 || in.vocab_begin < 0) {
    return absl::InvalidArgumentError(fmt::format("token masks: bad sizes (count {}, rows {}, vocab {}, vocab_begin {})",
                                                  in.count, in.rows, in.vocab, in.vocab_begin));
  }
  if (in.count == 0) return absl::OkStatus();
  if (static_cast<int64_t>(in.words_per_row) * 32 < in.vocab_begin + in.vocab) {
    return absl::InvalidArgumentError(fmt::format("token masks: {} words per row cannot cover tokens up to {}",
                                                  in.words_per_row, in.vocab_begin + in.vocab));
  }
  if (in.count > 65535) return absl::InvalidArgumentError(fmt::format("token masks: {} rows in one launch", in.count));
  if (in.logits == nullptr || in.words == nullptr || in.logit_rows == nullptr || in.mask_rows == nullptr) {
    return absl::InvalidArgumentError("token masks: logits, words, logit_rows and mask_rows must be device pointers");
  }
  return CudaStatus(LaunchApplyTokenMasks(in, stream), "token mask kernel");
}

}  // namespace sparkserve::kernels::cuda
