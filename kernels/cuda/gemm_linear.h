// Linear layers over many activation rows (prefill chunks, batched decode past kMaxDecodeRows): a
// tensor-core GEMM (mma.m16n8k16, fp16 in, fp32 accumulate) over the SAME device weights the decode
// GEMV reads (Nvfp4LinearDevice / Fp8LinearDevice, tile-major repacked at load), dequantising each
// weight tile once per block into shared memory where every warp of the block reuses it.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/decode_linear.h"

namespace sparkserve::kernels::cuda {

// Scratch any GEMM-linear call of 1..`rows` rows on an [out, in] weight needs (fp32 partial sums of
// its K splits, or the unsummed output an epilogue other than kStore reads). Covers every smaller
// row count too, so a buffer sized for the largest step serves all steps.
size_t GemmLinearWorkspaceBytes(int out, int in, int rows);

// y[r, o] = sum_i x[r, i] * W[o, i] for r < rows (any rows >= 1; the decode GEMV is faster for
// rows <= kMaxDecodeRows). x: [rows, in] fp16, 16-byte aligned; y: [rows, out] fp32 (kStore only).
// The epilogue (decode_linear.h DecodeEpilogue) works for any rows. `workspace` holds
// GemmLinearWorkspaceBytes(out, in, rows). Grid, shared memory and splits depend only on
// (rows, out, in), so the call can be captured in a CUDA graph.
absl::Status Nvfp4GemmLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue = {});
absl::Status Fp8GemmLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                           cudaStream_t stream, const DecodeEpilogue& epilogue = {});

}  // namespace sparkserve::kernels::cuda
