// Weight quantisation for the quantizer: an f32 matrix [out, in] to NVFP4 (E2M1 codes in 16-element
// groups with fp8 group scales searched for least squared error, and an f32 global scale) or to FP8
// E4M3 with one f32 scale per output channel, plus the squared-error figures the report prints.
#pragma once
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace sparkserve::quant {

inline constexpr int64_t kNvfp4GroupSize = 16;

// Squared-error bookkeeping for one tensor (sums, so tensors and layers add up).
struct QuantError {
  double signal = 0;     // sum of w^2
  double error = 0;      // sum of (w - dequant(w))^2 with the chosen scales
  double rtn_error = 0;  // the same with plain round-to-nearest scales (NVFP4 only; = error for FP8)
  void Add(const QuantError& o) {
    signal += o.signal;
    error += o.error;
    rtn_error += o.rtn_error;
  }
  // Relative Frobenius error ||W - Q(W)|| / ||W|| (0 for an all-zero tensor).
  double relative() const;
  double relative_rtn() const;
};

struct Nvfp4Weight {
  core::Tensor packed;        // u8  [out, in/2]  element 2j = low nibble of byte j
  core::Tensor scale;         // fp8 [out, in/16] row-major
  core::Tensor global_scale;  // f32 [1]          a divisor: W = e2m1 * f32(scale) / global_scale
  QuantError error;
};

struct Fp8Weight {
  core::Tensor weight;  // fp8 [out, in]
  core::Tensor scale;   // f32 [out, 1]   W = f32(fp8) * scale
  QuantError error;
};

// NVFP4 global scale as the compressed-tensors producers set it: 448 * 6 / amax (1 when amax is 0).
float Nvfp4GlobalScale(float amax);

// Quantises `w` ([out, in] row-major f32; in % 16 == 0). Each group's fp8 scale is the best of a few
// candidates around the round-to-nearest one (amax16 / 6 * global) by the group's squared error
// when `search_scales`, else the round-to-nearest one.
Nvfp4Weight QuantizeNvfp4(std::span<const float> w, int64_t out, int64_t in, bool search_scales = true);

// FP8 E4M3 with per-row scale amax_row / 448 (rows of zeros get scale 1).
Fp8Weight QuantizeFp8PerChannel(std::span<const float> w, int64_t out, int64_t in);

// A float tensor (f32/bf16/f16) widened to f32 values.
void WidenToF32(const core::Tensor& t, std::span<float> out);

}  // namespace sparkserve::quant
