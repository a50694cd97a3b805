// Internal to kernels/cuda: the row-wise op launchers (norm_ops.cu) and the limits the host
// wrappers (norm_ops.cc) check before calling them. No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparkserve::kernels::cuda {

// Largest row the RMSNorm kernels take: a row lives in registers, at most 1024 threads x 16 floats.
inline constexpr int kMaxNormDim = 16384;

cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int n,
                                  float* out, cudaStream_t stream);
// Plain norm when delta == nullptr (x read only); otherwise residual = x + delta is written back
// to `residual` (== x) and normed.
cudaError_t LaunchRmsNormZeroCentered(const float* x, const float* delta, float* residual, const float* w, int rows,
                                      int dim, float eps, float* out_f32, __half* out_f16, cudaStream_t stream);
cudaError_t LaunchGatherRows(const float* x, int dim, const int32_t* rows_idx, int n, float* out,
                             cudaStream_t stream);
cudaError_t LaunchSwiGlu(const float* gate, const float* up, int rows, int cols, int ld, __half* out,
                         cudaStream_t stream);
cudaError_t LaunchF32ToF16(const float* x, int64_t n, __half* out, cudaStream_t stream);
cudaError_t LaunchAddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
