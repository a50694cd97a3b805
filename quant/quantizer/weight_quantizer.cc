// NVFP4 / FP8 weight quantisation with per-group scale search (see weight_quantizer.h).
#include "quant/quantizer/weight_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::quant {
namespace {

// Codes and squared error of one 16-group quantised with effective scale `s` (= f32(fp8) / global).
double GroupError(const float* x, float s, uint8_t* codes) {
  double err = 0;
  const float inv = s > 0 ? 1.0f / s : 0.0f;
  for (int i = 0; i < kNvfp4GroupSize; ++i) {
    const uint8_t c = F32ToE2M1(x[i] * inv);
    // The reader (and the library) dequantise to bf16: measure against what they will see.
    const float q = core::Bf16ToF32(core::F32ToBf16(E2M1ToF32(c) * s));
    const double d = static_cast<double>(x[i]) - q;
    err += d * d;
    if (codes) codes[i] = c;
  }
  return err;
}

}  // namespace

double QuantError::relative() const { return signal > 0 ? std::sqrt(error / signal) : 0.0; }
double QuantError::relative_rtn() const { return signal > 0 ? std::sqrt(rtn_error / signal) : 0.0; }

float Nvfp4GlobalScale(float amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0f;
  return std::min(kE4M3Max * kE2M1Max / amax, 3.4028235e38f);
}

Nvfp4Weight QuantizeNvfp4(std::span<const float> w, int64_t out, int64_t in, bool search_scales) {
  const int64_t groups = in / kNvfp4GroupSize;
  Nvfp4Weight r;
  r.packed = core::Tensor::Empty({out, in / 2}, core::DType::kU8);
  r.scale = core::Tensor::Empty({out, groups}, core::DType::kF8E4M3);
  r.global_scale = core::Tensor::Empty({1}, core::DType::kF32);
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  const float gs = Nvfp4GlobalScale(amax);
  r.global_scale.data<float>()[0] = gs;
  uint8_t* packed = r.packed.data<uint8_t>();
  uint8_t* scales = r.scale.data<uint8_t>();
  uint8_t codes[kNvfp4GroupSize], best_codes[kNvfp4GroupSize];
  for (int64_t row = 0; row < out; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w.data() + row * in + g * kNvfp4GroupSize;
      float gmax = 0;
      double sig = 0;
      for (int i = 0; i < kNvfp4GroupSize; ++i) {
        gmax = std::max(gmax, std::fabs(x[i]));
        sig += static_cast<double>(x[i]) * x[i];
      }
      // Round-to-nearest scale code; a zero scale becomes the smallest step (the library uses 0.125
      // for zero groups: any positive scale decodes an all-zero group exactly).
      uint8_t rtn = F32ToE4M3(std::min(gmax / kE2M1Max * gs, kE4M3Max));
      if (rtn == 0) rtn = 1;
      const double rtn_err = GroupError(x, E4M3ToF32(rtn) / gs, best_codes);
      uint8_t best = rtn;
      double best_err = rtn_err;
      if (search_scales && gmax > 0) {
        // Positive fp8 codes are monotonic in value: neighbours are the next smaller/larger scales.
        // Smaller scales trade clipping of the largest element for finer steps elsewhere.
        for (int d = -4; d <= 1; ++d) {
          const int c = static_cast<int>(rtn) + d;
          if (d == 0 || c < 1 || c > 0x7e) continue;
          const double e = GroupError(x, E4M3ToF32(static_cast<uint8_t>(c)) / gs, codes);
          if (e < best_err) {
            best_err = e;
            best = static_cast<uint8_t>(c);
            std::memcpy(best_codes, codes, sizeof codes);
          }
        }
      }
      scales[row * groups + g] = best;
      uint8_t* p = packed + row * (in / 2) + g * (kNvfp4GroupSize / 2);
      for (int i = 0; i < kNvfp4GroupSize / 2; ++i) p[i] = PackE2M1(best_codes[2 * i], best_codes[2 * i + 1]);
      r.error.signal += sig;
      r.error.error += best_err;
      r.error.rtn_error += rtn_err;
    }
  }
  return r;
}

Fp8Weight QuantizeFp8PerChannel(std::span<const float> w, int64_t out, int64_t in) {
  Fp8Weight r;
  r.weight = core::Tensor::Empty({out, in}, core::DType::kF8E4M3);
  r.scale = core::Tensor::Empty({out, 1}, core::DType::kF32);
  uint8_t* q = r.weight.data<uint8_t>();
  float* scales = r.scale.data<float>();
  for (int64_t row = 0; row < out; ++row) {
    const float* x = w.data() + row * in;
    float amax = 0;
    for (int64_t i = 0; i < in; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = amax > 0 ? amax / kE4M3Max : 1.0f;
    scales[row] = s;
    const float inv = 1.0f / s;
    for (int64_t i = 0; i < in; ++i) {
      const uint8_t c = F32ToE4M3(x[i] * inv);
      q[row * in + i] = c;
      const double d = static_cast<double>(x[i]) - static_cast<double>(E4M3ToF32(c) * s);
      r.error.signal += static_cast<double>(x[i]) * x[i];
      r.error.error += d * d;
    }
  }
  r.error.rtn_error = r.error.error;
  return r;
}

void WidenToF32(const core::Tensor& t, std::span<float> out) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case core::DType::kF32: std::memcpy(out.data(), t.raw_data(), static_cast<size_t>(n) * 4); break;
    case core::DType::kBF16: {
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = core::Bf16ToF32(h);
      }
      break;
    }
    case core::DType::kF16: {
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = core::F16ToF32(h);
      }
      break;
    }
    default: std::fill(out.begin(), out.end(), 0.0f); break;
  }
}

}  // namespace sparkserve::quant
