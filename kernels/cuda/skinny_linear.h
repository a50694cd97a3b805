// Skinny linear layers: NVFP4 (W4A16) and FP8 (W8A16) weights against 9..kMaxSkinnyRows activation
// rows (batched decode of up to 64 sequences), reading every weight once per call whatever the row
// count, on the same tile-major repacked device weights the decode GEMV and the GEMM read
// (Nvfp4LinearDevice / Fp8LinearDevice, decode_linear.h). Between the decode GEMV (rows <=
// kMaxDecodeRows) and the tensor-core GEMM (rows > kMaxSkinnyRows).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/decode_linear.h"

namespace sparkserve::kernels::cuda {

// Most activation rows one skinny call takes (8 mma n-tiles of 8 rows). CudaLinear::Run sends rows
// kMaxDecodeRows + 1 .. kMaxSkinnyRows here, more to the GEMM: at 64 rows this kernel is mma-bound
// with one weight pass (~12-15 us for 18432x2560 NVFP4, against the GEMM's 45.9 us measured), and
// past 64 it would have to read the weights twice, where the GEMM's shared-memory dequantisation
// starts to pay off. Re-measure the crossover with gpu_kernel_check before raising it.
inline constexpr int kMaxSkinnyRows = 64;

// Scratch any skinny call of 1..`rows` rows (rows <= kMaxSkinnyRows) on an [out, in] weight needs
// (fp32 partial sums of its K pieces), for either weight format: one buffer of this size serves
// every smaller call too.
size_t SkinnyLinearWorkspaceBytes(int out, int in, int rows);

// y[r, o] = sum_i x[r, i] * W[o, i] for r < rows (1..kMaxSkinnyRows; CudaLinear uses it for 9..64).
// x: [rows, in] fp16, 16-byte aligned; y: [rows, out] fp32 (kStore). The epilogue is the decode
// linears' (DecodeEpilogue: store, SwiGLU, residual add + RMSNorm). `workspace` holds
// SkinnyLinearWorkspaceBytes(out, in, rows). Grid, shared memory and K pieces depend only on
// (rows, out, in) and the device, so the call can be captured in a CUDA graph.
absl::Status Nvfp4SkinnyLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                               cudaStream_t stream, const DecodeEpilogue& epilogue = {});
absl::Status Fp8SkinnyLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue = {});

}  // namespace sparkserve::kernels::cuda
