// Linear layers over many activation rows (prefill chunks, batched decode past kMaxDecodeRows): a
// tensor-core GEMM (fp16 in, fp32 accumulate) over the SAME device weights the decode GEMV reads
// (Nvfp4LinearDevice / Fp8LinearDevice, tile-major repacked at load). On sm_90a (H100/H200) it runs
// wgmma with each thread dequantising its A fragments into registers (gemm_wgmma.cu); elsewhere
// mma.m16n8k16 with each weight tile dequantised once per block into shared memory (gemm_linear.cu).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/gemm_linear_kernels.h"  // GemmKernel

namespace sparkserve::kernels::cuda {

// Scratch any GEMM-linear call of 1..`rows` rows on an [out, in] weight needs (fp32 partial sums of
// its K splits, or the unsummed output an epilogue other than kStore reads). Covers every smaller
// row count too, so a buffer sized for the largest step serves all steps.
size_t GemmLinearWorkspaceBytes(int out, int in, int rows);

// y[r, o] = sum_i x[r, i] * W[o, i] for r < rows (any rows >= 1; the decode GEMV is faster for
// rows <= kMaxDecodeRows). x: [rows, in] fp16, 16-byte aligned; y: [rows, out] fp32 (kStore only).
// The epilogue (decode_linear.h DecodeEpilogue) works for any rows. `workspace` holds
// GemmLinearWorkspaceBytes(out, in, rows). Grid, shared memory and splits depend only on
// (rows, out, in), so the call can be captured in a CUDA graph. `kernel` forces one kernel (tests,
// timing); kWgmma where it does not run is an error.
absl::Status Nvfp4GemmLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue = {},
                             GemmKernel kernel = GemmKernel::kAuto);
absl::Status Fp8GemmLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                           cudaStream_t stream, const DecodeEpilogue& epilogue = {}, GemmKernel kernel = GemmKernel::kAuto);

}  // namespace sparkserve::kernels::cuda
