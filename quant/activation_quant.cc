// Activation quantisation codecs (see activation_quant.h).
#include "quant/activation_quant.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "fmt/format.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::quant {

namespace {

constexpr int64_t kGroup = 16;

// One 16-element group: its scale code and element codes (see activation_quant.h).
uint8_t QuantizeGroup(const float* x, float gs, uint8_t codes[kGroup]) {
  float amax = 0;
  for (int64_t i = 0; i < kGroup; ++i) amax = std::max(amax, std::fabs(x[i]));
  uint8_t scale = F32ToE4M3(std::clamp(gs * (amax / kE2M1Max), -kE4M3Max, kE4M3Max));
  float s = E4M3ToF32(scale);
  if (s == 0.0f) {
    s = 0.125f;
    scale = F32ToE4M3(s);
  }
  const float e = s / gs;
  for (int64_t i = 0; i < kGroup; ++i) {
    codes[i] = F32ToE2M1(std::clamp(x[i] / e, -kE2M1Max, kE2M1Max));
  }
  return scale;
}

}  // namespace

void FakeQuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, float* out) {
  uint8_t codes[kGroup];
  for (int64_t g = 0; g < rows * in; g += kGroup) {
    const float e = E4M3ToF32(QuantizeGroup(x + g, gs, codes)) / gs;
    for (int64_t i = 0; i < kGroup; ++i) out[g + i] = E2M1ToF32(codes[i]) * e;
  }
}

void QuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, uint8_t* codes, uint8_t* scales) {
  uint8_t c[kGroup];
  for (int64_t g = 0; g < rows * in; g += kGroup) {
    scales[g / kGroup] = QuantizeGroup(x + g, gs, c);
    for (int64_t i = 0; i < kGroup; i += 2) codes[(g + i) / 2] = PackE2M1(c[i], c[i + 1]);
  }
}

void FakeQuantizeFp8(float* x, int64_t count, float scale) {
  for (int64_t i = 0; i < count; ++i) x[i] = E4M3ToF32(F32ToE4M3(x[i] / scale)) * scale;
}

absl::StatusOr<std::map<std::string, std::pair<float, float>>> ReadKvScales(const Checkpoint& ckpt) {
  std::map<std::string, std::pair<float, float>> kv;
  constexpr std::string_view kK = ".k_scale";
  for (const std::string& n : ckpt.other_tensors()) {
    if (n.size() <= kK.size() || n.compare(n.size() - kK.size(), kK.size(), kK) != 0) continue;
    const std::string attn = n.substr(0, n.size() - kK.size());
    ASSIGN_OR_RETURN(core::Tensor k, ckpt.DenseF32(n));
    ASSIGN_OR_RETURN(core::Tensor v, ckpt.DenseF32(attn + ".v_scale"));
    if (k.numel() != 1 || v.numel() != 1)
      return absl::InvalidArgumentError(fmt::format("{}: k_scale / v_scale must be per tensor ([1])", attn));
    const float ks = k.data<float>()[0], vs = v.data<float>()[0];
    if (!(ks > 0) || !(vs > 0) || !std::isfinite(ks) || !std::isfinite(vs))
      return absl::InvalidArgumentError(fmt::format("{}: k_scale {} / v_scale {} must be positive and finite", attn, ks, vs));
    kv[attn] = {ks, vs};
  }
  return kv;
}

}  // namespace sparkserve::quant
