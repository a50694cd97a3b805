// Internal to kernels/cuda: the decode-linear launchers (decode_linear.cu) and the K-split plan they
// share with the host code (decode_linear.cc). No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/decode_linear.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kDecodeWarpsPerBlock = 4;  // one 16-row tile a warp
inline constexpr int kNvfp4Step = 128;  // K elements per warp iteration: 8 groups of 16 (64 bytes a row)
inline constexpr int kFp8Step = 64;     // K elements per warp iteration: 4 mma k16 (64 bytes a row)

// NVFP4 decode layout: sign bit of pair k in a word's low half (+ 16 in the high half), magnitude at
// bits 3k..3k+2 (decode_layout.cuh E2m1PairScaledDown unpacks it).
inline constexpr int kE2m1PairSignBit[4] = {14, 13, 12, 15};

// The scale an NVFP4 linear's fp32 sums take (SplitSum's `scale`): every NVFP4 kernel's unpacked
// weights carry a 2^-14 factor (decode_layout.cuh E2m1PairScaledDown) and the global scale divides
// (per row through row_global_scales when the linear is a fused stack).
inline float Nvfp4SumScale(const Nvfp4LinearDevice& w) {
  return w.row_global_scales != nullptr ? 16384.0f : 16384.0f / w.global_scale;
}

struct SplitPlan {
  int tiles, steps, num_splits, steps_per_split;
};
SplitPlan PlanSplits(int out, int steps);

cudaError_t LaunchNvfp4Decode(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              const DecodeEpilogue& epilogue, cudaStream_t stream);
cudaError_t LaunchFp8Decode(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            const DecodeEpilogue& epilogue, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
