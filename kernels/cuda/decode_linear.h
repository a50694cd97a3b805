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

// An NVFP4 Linear in device memory, repacked tile-major for the decode kernel: for each 16-row
// tile, for each K step of 128 elements, 1024 bytes of codes (rows q, then rows q + 8, 16 bytes a
// lane) and 128 bytes of group scales (per q: 8 of row q, 8 of row q + 8).
struct Nvfp4LinearDevice {
  const uint8_t* packed;   // [tiles, in/128, 2, 32 lanes, 16] E2M1 codes (RepackNvfp4ForDecode)
  const uint8_t* scales;   // [tiles, in/128, 8, 2, 8] float8_e4m3fn group scales (same function)
  float global_scale;      // divisor: W = e2m1 * scale / global_scale
  int out, in;             // in % 128 == 0; tiles = ceil(out / 16), missing rows zero
  // Optional [out] per-row divisors replacing global_scale (several linears fused along out, each
  // with its own global scale).
  const float* row_global_scales = nullptr;
};

// An FP8 Linear with per-output-channel scales in device memory, repacked tile-major: for each
// 16-row tile, for each K step of 64 elements, 1024 bytes (rows q, then rows q + 8, 16 a lane).
struct Fp8LinearDevice {
  const uint8_t* weight;   // [tiles, in/64, 2, 32 lanes, 16] float8_e4m3fn (RepackFp8ForDecode)
  const float* scales;     // [out] multiplier: W = fp8 * scale
  int out, in;             // in % 64 == 0
};

// Host-side repacking (once, at load) of the row-major compressed-tensors layouts
// (weight_packed [out, in/2], weight_scale [out, in/16]; fp8 weight [out, in]).
struct Nvfp4DecodeLayout {
  std::vector<uint8_t> packed, scales;
};
Nvfp4DecodeLayout RepackNvfp4ForDecode(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int out,
                                       int in);
std::vector<uint8_t> RepackFp8ForDecode(std::span<const uint8_t> weight, int out, int in);

// What a decode linear does with its output once its K splits are summed and scaled (the kernel
// that sums the splits does it, so the step saves the kernel that would follow):
//   kStore       y [rows, out] f32.
//   kSwiGlu      a fused gate|up linear (out = 2F, gate rows first): x_out [rows, F] f16 =
//                silu(gate) * up; y is not written.
//   kAddRmsNorm  residual [rows, out] += the output, in place, then x_out [rows, out] f16 = the
//                zero-centred RMSNorm residual / rms(residual) * (1 + norm_weight) (eps inside the
//                root); y is not written.
// f16 values saturate at +-65504 (NaN stays NaN).
struct DecodeEpilogue {
  enum class Kind : int { kStore, kSwiGlu, kAddRmsNorm };
  Kind kind = Kind::kStore;
  __half* x_out = nullptr;
  float* residual = nullptr;
  const float* norm_weight = nullptr;
  float eps = 0.f;

  static DecodeEpilogue SwiGlu(__half* x_out) {
    DecodeEpilogue e;
    e.kind = Kind::kSwiGlu;
    e.x_out = x_out;
    return e;
  }
  static DecodeEpilogue AddRmsNorm(__half* x_out, float* residual, const float* norm_weight, float eps) {
    DecodeEpilogue e;
    e.kind = Kind::kAddRmsNorm;
    e.x_out = x_out;
    e.residual = residual;
    e.norm_weight = norm_weight;
    e.eps = eps;
    return e;
  }

  // The same for rows r0.. of a linear with `out` outputs.
  DecodeEpilogue FromRow(int r0, int out) const {
    DecodeEpilogue e = *this;
    const size_t row = static_cast<size_t>(r0) * (kind == Kind::kSwiGlu ? out / 2 : out);
    if (e.x_out) e.x_out += row;
    if (e.residual) e.residual += row;
    return e;
  }
};

// OK when `e` has what its kind needs for a linear of `out` outputs (kStore: y; kSwiGlu: x_out and an
// even out; kAddRmsNorm: x_out, residual, norm_weight, eps >= 0), else InvalidArgument naming `what`.
// Every linear kernel family (decode, GEMM, W4A4) checks its epilogue with it.
absl::Status CheckLinearEpilogue(const char* what, const DecodeEpilogue& e, int out, const float* y);

// What the many-row families (GEMM, skinny) check of a call: out >= 1, `in` a positive multiple of
// k_multiple, rows in 1..max_rows, x a 16-byte aligned pointer, and the epilogue (above).
absl::Status CheckLinearCall(const char* what, int out, int in, int k_multiple, int max_rows, const __half* x,
                             int rows, const float* y, const DecodeEpilogue& e);
// The weights are complete: NVFP4 packed codes and group scales with a positive global scale (or
// per-row divisors); FP8 weight and per-channel scales. Else InvalidArgument naming `what`.
absl::Status CheckLinearWeights(const char* what, const Nvfp4LinearDevice& w);
absl::Status CheckLinearWeights(const char* what, const Fp8LinearDevice& w);

// Scratch a decode linear needs: fp32 partial sums of its K splits.
size_t DecodeLinearWorkspaceBytes(int out, int in, int rows);

// y[r, o] = sum_i x[r, i] * W[o, i] for r < rows (1..kMaxDecodeRows). x: [rows, in] fp16
// (activations are converted to fp16 for the tensor cores), y: [rows, out] fp32 or bf16.
absl::Status Nvfp4DecodeLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                               cudaStream_t stream, const DecodeEpilogue& epilogue = {});
absl::Status Fp8DecodeLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue = {});

}  // namespace sparkserve::kernels::cuda
