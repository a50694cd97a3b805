// Row-wise CUDA ops around the linears: embedding gather, zero-centred RMSNorm (plain and fused
// with the residual add), row gathers, SwiGLU and f32 -> f16 conversion. Activations travel in
// f32 between ops; a linear's input is written in f16 (the decode tensor-core kernels read f16).
// The CPU twins are in kernels/cpu/ops.h (norm.cc, activation.cc, embedding.cc).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

// out[i, :] = table[ids[i], :] widened to f32. table bf16 [vocab, dim]; ids (device) [n]; out [n, dim].
// An id outside [0, vocab) writes a zero row (callers validate ids on the host first).
absl::Status EmbeddingGather(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int n,
                             float* out, cudaStream_t stream);

// out = x / rms(x) * (1 + w) per row (Qwen3.5's zero-centred norm). x [rows, dim]; w f32 [dim].
// Writes out_f32 [rows, dim] and/or out_f16 [rows, dim] (either may be null; out_f32 may alias x).
absl::Status RmsNormZeroCentered(const float* x, const float* w, int rows, int dim, float eps, float* out_f32,
                                 __half* out_f16, cudaStream_t stream);

// residual += delta, then the norm above of the new residual. residual, delta [rows, dim].
absl::Status AddRmsNormZeroCentered(float* residual, const float* delta, const float* w, int rows, int dim,
                                    float eps, float* out_f32, __half* out_f16, cudaStream_t stream);

// out[i, :] = x[rows_idx[i], :]. x [*, dim]; rows_idx (device) [n]; out [n, dim].
absl::Status GatherRows(const float* x, int dim, const int32_t* rows_idx, int n, float* out, cudaStream_t stream);

// out[r, c] = silu(gate[r * ld + c]) * up[r * ld + c] as f16, for r < rows, c < cols. out [rows, cols].
absl::Status SwiGlu(const float* gate, const float* up, int rows, int cols, int ld, __half* out,
                    cudaStream_t stream);

// out = x as f16 (saturating at +-65504). x, out [n].
absl::Status F32ToF16(const float* x, int64_t n, __half* out, cudaStream_t stream);

// x += y, all [n].
absl::Status AddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
