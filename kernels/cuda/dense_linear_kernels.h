// Internal to kernels/cuda: the dense bf16 linear launcher (dense_linear.cu) and the row count that
// splits its GEMV path from its tiled path. No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace sparkserve::kernels::cuda {

// Up to this many activation rows take the GEMV (one pass over the weights); more take tiles.
inline constexpr int kDenseGemvMaxRows = 8;
// The tiled path puts row tiles on grid.y: rows <= 65535 * kDenseTileRows.
inline constexpr int kDenseTileRows = 64;
inline constexpr int kDenseMaxRows = 65535 * kDenseTileRows;

cudaError_t LaunchDenseLinearBf16(const __nv_bfloat16* w, int out, int in, const __half* x, int rows, float* y,
                                  cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
