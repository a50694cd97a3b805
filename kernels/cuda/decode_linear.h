// Decode-time linear layers (a few activation rows against quantised weights): W4A16 NVFP4 and
// W8A16 FP8 on tensor cores (mma.m16n8k16, fp16 in, fp32 accumulate), one pass over the weights
// for every row of the step, dequantising in registers. Weights are repacked once at load into the
// order the kernels' lanes read them (RepackNvfp4ForDecode / RepackFp8ForDecode).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

// Most activation rows one decode launch takes (the mma's n dimension).
inline constexpr int kMaxDecodeRows = 8;

// An NVFP4 Linear in device memory, repacked for the decode kernel.
struct Nvfp4LinearDevice {
  const uint8_t* packed;   // [out, in/2]  E2M1 codes, repacked by RepackNvfp4ForDecode
  const uint8_t* scales;   // [out, in/16] float8_e4m3fn group scales, row-major (as stored)
  float global_scale;      // divisor: W = e2m1 * scale / global_scale
  int out, in;             // out % 16 == 0, in % 128 == 0
};

// An FP8 Linear with per-output-channel scales in device memory, repacked for the decode kernel.
struct Fp8LinearDevice {
  const uint8_t* weight;   // [out, in] float8_e4m3fn, repacked by RepackFp8ForDecode
  const float* scales;     // [out] multiplier: W = fp8 * scale
  int out, in;             // out % 16 == 0, in % 64 == 0
};

// Host-side repacking (once, at load) of the row-major compressed-tensors layouts. Pure byte
// permutations within each row: the same bytes, read by one 16-byte load per lane.
std::vector<uint8_t> RepackNvfp4ForDecode(std::span<const uint8_t> packed, int out, int in);
std::vector<uint8_t> RepackFp8ForDecode(std::span<const uint8_t> weight, int out, int in);

// Scratch a decode linear needs: fp32 partial sums of its K splits.
size_t DecodeLinearWorkspaceBytes(int out, int in, int rows);

// y[r, o] = sum_i x[r, i] * W[o, i] for r < rows (1..kMaxDecodeRows). x: [rows, in] fp16
// (activations are converted to fp16 for the tensor cores), y: [rows, out] fp32 or bf16.
absl::Status Nvfp4DecodeLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                               cudaStream_t stream);
absl::Status Fp8DecodeLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream);

// Converts bf16 activations to fp16 (saturating at +-65504).
absl::Status Bf16ToF16(const void* x_bf16, __half* x_f16, int64_t n, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
