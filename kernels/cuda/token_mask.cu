// The token-mask kernel: one thread per logit, one grid row per masked logits row.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/token_mask_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// A warp reads one mask word (its 32 tokens share it) and writes only the logits it disallows.
__global__ void ApplyTokenMasksKernel(TokenMaskInputs in) {
  const int pair = blockIdx.y;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (v >= in.vocab) return;
  const int64_t token = in.vocab_begin + v;
  const uint32_t word = in.words[static_cast<int64_t>(in.mask_rows[pair]) * in.words_per_row + (token >> 5)];
  if (!((word >> (token & 31)) & 1u)) {
    in.logits[static_cast<int64_t>(in.logit_rows[pair]) * in.vocab + v] = -INFINITY;
  }
}

}  // namespace

cudaError_t LaunchApplyTokenMasks(const TokenMaskInputs& in, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((in.vocab + kThreads - 1) / kThreads), static_cast<unsigned>(in.count));
  ApplyTokenMasksKernel<<<grid, kThreads, 0, stream>>>(in);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
