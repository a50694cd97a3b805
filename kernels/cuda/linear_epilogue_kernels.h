// Internal to kernels/cuda: the epilogue every linear kernel shares. A linear writes fp32 partial
// sums of its K splits; SplitSum adds them up and scales them, and LaunchLinearEpilogue runs the
// linear's DecodeEpilogue (store, SwiGLU, residual add + RMSNorm) over them in one kernel.
// No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/decode_linear.h"

namespace sparkserve::kernels::cuda {

// Output o of a linear, summed over its splits and scaled: per tensor, per row (row_scales), or
// `scale / row_divisors[o]` (fused NVFP4 linears with per-part global scales).
struct SplitSum {
  const float* partial;  // [num_splits, rows, out]
  int num_splits, rows, out;
  float scale;
  const float* row_scales;
  const float* row_divisors;

#ifdef __CUDACC__
  __device__ __forceinline__ float operator()(int r, int o) const {
    const int64_t n = static_cast<int64_t>(rows) * out, i = static_cast<int64_t>(r) * out + o;
    float sum = 0.f;
    int s = 0;
    for (; s + 8 <= num_splits; s += 8) {  // eight independent loads in flight, not a serial walk
      float v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = partial[(s + j) * n + i];
      sum += ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
    }
    for (; s < num_splits; ++s) sum += partial[s * n + i];
    return row_divisors ? sum * (scale / row_divisors[o]) : sum * (row_scales ? row_scales[o] : scale);
  }
#endif
};

// Runs `epilogue` over the summed, scaled output (kStore writes y [rows, out] f32).
cudaError_t LaunchLinearEpilogue(const SplitSum& sum, float* y, const DecodeEpilogue& epilogue, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
