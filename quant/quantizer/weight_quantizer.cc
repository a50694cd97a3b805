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

// Squared error of one 16-group quantised with effective scale `s` (= f32(fp8) / global), in f32
// without the final bf16 rounding: the search's cost function. Branch-free E2M1 rounding of |x| / s
// (thresholds as F32ToE2M1: <=0.25 -> 0, <0.75 -> 0.5, <=1.25 -> 1, <1.75 -> 1.5, <=2.5 -> 2,
// <3.5 -> 3, <=5 -> 4, else 6) so the loop vectorises.
inline float FastGroupError(const float* ax, float s) {
  const float inv = 1.0f / s;
  float err = 0;
  for (int i = 0; i < kNvfp4GroupSize; ++i) {
    const float a = ax[i] * inv;
    const float q = 0.5f * static_cast<float>(a > 0.25f) + 0.5f * static_cast<float>(a >= 0.75f) +
                    0.5f * static_cast<float>(a > 1.25f) + 0.5f * static_cast<float>(a >= 1.75f) +
                    static_cast<float>(a > 2.5f) + static_cast<float>(a >= 3.5f) + 2.0f * static_cast<float>(a > 5.0f);
    const float d = ax[i] - q * s;
    err += d * d;
  }
  return err;
}

// Codes of one group at effective scale `s` and their exact squared error as the reader (and the
// library) dequantise: bf16(e2m1 * s).
double GroupCodes(const float* x, float s, uint8_t* codes) {
  float value[8];  // bf16(e2m1 magnitude i * s)
  for (uint8_t i = 0; i < 8; ++i) value[i] = core::Bf16ToF32(core::F32ToBf16(E2M1ToF32(i) * s));
  double err = 0;
  const float inv = 1.0f / s;
  for (int i = 0; i < kNvfp4GroupSize; ++i) {
    const float a = std::fabs(x[i] * inv);
    // The index F32ToE2M1 gives, without branches.
    const int idx = static_cast<int>(a > 0.25f) + static_cast<int>(a >= 0.75f) + static_cast<int>(a > 1.25f) +
                    static_cast<int>(a >= 1.75f) + static_cast<int>(a > 2.5f) + static_cast<int>(a >= 3.5f) +
                    static_cast<int>(a > 5.0f);
    codes[i] = static_cast<uint8_t>(idx | (std::signbit(x[i]) ? 8 : 0));
    const double d = static_cast<double>(std::fabs(x[i])) - value[idx];
    err += d * d;
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
  uint8_t best_codes[kNvfp4GroupSize];
  for (int64_t row = 0; row < out; ++row) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w.data() + row * in + g * kNvfp4GroupSize;
      float gmax = 0;
      double sig = 0;
      for (int i = 0; i < kNvfp4GroupSize; ++i) {
        gmax = std::max(gmax, std::fabs(x[i]));
        sig += static_cast<double>(x[i]) * x[i];
      }
      float ax[kNvfp4GroupSize];
      for (int i = 0; i < kNvfp4GroupSize; ++i) ax[i] = std::fabs(x[i]);
      // Round-to-nearest scale code; a zero scale becomes the smallest step (any positive scale
      // decodes an all-zero group exactly).
      uint8_t rtn = F32ToE4M3(std::min(gmax / kE2M1Max * gs, kE4M3Max));
      if (rtn == 0) rtn = 1;
      const float rtn_err = FastGroupError(ax, E4M3ToF32(rtn) / gs);
      uint8_t best = rtn;
      float best_err = rtn_err;
      if (search_scales && gmax > 0) {
        // Positive fp8 codes are monotonic in value: neighbours are the next smaller/larger scales.
        // Smaller scales trade clipping of the largest element for finer steps elsewhere.
        for (int d = -4; d <= 1; ++d) {
          const int c = static_cast<int>(rtn) + d;
          if (d == 0 || c < 1 || c > 0x7e) continue;
          const float e = FastGroupError(ax, E4M3ToF32(static_cast<uint8_t>(c)) / gs);
          if (e < best_err) {
            best_err = e;
            best = static_cast<uint8_t>(c);
          }
        }
      }
      const double exact_err = GroupCodes(x, E4M3ToF32(best) / gs, best_codes);
      scales[row * groups + g] = best;
      uint8_t* p = packed + row * (in / 2) + g * (kNvfp4GroupSize / 2);
      for (int i = 0; i < kNvfp4GroupSize / 2; ++i) p[i] = PackE2M1(best_codes[2 * i], best_codes[2 * i + 1]);
      r.error.signal += sig;
      r.error.error += exact_err;
      r.error.rtn_error += best == rtn ? exact_err : static_cast<double>(rtn_err);
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
