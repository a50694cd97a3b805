// Simulated NVFP4 activations / FP8 KV: QDQ on hand-checked groups (FORMATS.md §3 thresholds),
// idempotence, zero groups, and the simulator substituting inputs only for modules with a scale.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "calib/activation_fake_quant.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::calib {
namespace {

using quant::FakeQuantizeFp8;
using quant::FakeQuantizeNvfp4Rows;
using quant::QuantizeNvfp4Rows;

TEST(FakeQuantizeNvfp4, GroupWithUnitEffectiveScaleRoundsToTheE2M1Grid) {
  // amax 6 and gs 448: s = fp8(448 * 6 / 6) = 448, effective scale s / gs = 1.
  const std::vector<float> x = {0.25f, 0.3f, 0.74f, 0.76f, 1.25f, 1.3f, 1.74f, 2.5f,
                                2.6f, 3.49f, 3.5f, 5.0f, 5.1f, 6.0f, -0.8f, -6.0f};
  const std::vector<float> want = {0, 0.5f, 0.5f, 1, 1, 1.5f, 1.5f, 2, 3, 3, 4, 4, 6, 6, -1, -6};
  std::vector<float> out(16);
  FakeQuantizeNvfp4Rows(x.data(), 1, 16, 448.0f, out.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(FakeQuantizeNvfp4, ScalesPerGroupAndIsIdempotent) {
  // Two rows of 32 (four groups): a small group, a large one, zeros, a mixed one.
  std::vector<float> x(64);
  for (int i = 0; i < 16; ++i) x[i] = 0.001f * static_cast<float>(i - 7);
  for (int i = 16; i < 32; ++i) x[i] = 3.0f * std::sin(static_cast<float>(i));
  for (int i = 48; i < 64; ++i) x[i] = (i % 3 == 0 ? 10.0f : 0.1f) * std::cos(static_cast<float>(i));
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float gs = 448.0f * 6.0f / amax;
  std::vector<float> q(64), qq(64);
  FakeQuantizeNvfp4Rows(x.data(), 2, 32, gs, q.data());
  for (int i = 32; i < 48; ++i) EXPECT_EQ(q[i], 0.0f);
  double err = 0, sig = 0;
  for (int i = 0; i < 64; ++i) {
    err += (q[i] - x[i]) * (q[i] - x[i]);
    sig += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(err / sig), 0.2);  // 4-bit elements with per-16 scales
  EXPECT_GT(std::sqrt(err / sig), 0.0);
  FakeQuantizeNvfp4Rows(q.data(), 2, 32, gs, qq.data());
  EXPECT_EQ(q, qq);
  // A too-large global scale saturates the group scale at 448 and clips: the error grows.
  std::vector<float> clipped(64);
  FakeQuantizeNvfp4Rows(x.data(), 2, 32, gs * 1000.0f, clipped.data());
  double err_clip = 0;
  for (int i = 0; i < 64; ++i) err_clip += (clipped[i] - x[i]) * (clipped[i] - x[i]);
  EXPECT_GT(err_clip, 10 * err);
}

TEST(QuantizeNvfp4Rows, CodesAndScalesDequantiseToFakeQuantizeBitForBit) {
  // Normal values, a zero group, a tiny group (scale rounds to 0 -> 0.125), values past the
  // clipping point, NaN and +-inf, -0.
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = 0.37f * std::sin(1.7f * static_cast<float>(i)) * (i % 5 == 0 ? 9.f : 1.f);
  for (int i = 16; i < 32; ++i) x[i] = 0.0f;
  for (int i = 32; i < 48; ++i) x[i] = 1e-9f * static_cast<float>(i - 40);
  x[50] = std::nanf("");
  x[70] = std::numeric_limits<float>::infinity();
  x[71] = -std::numeric_limits<float>::infinity();
  x[90] = -0.0f;
  const float gs = 448.0f * 6.0f / 2.0f;
  std::vector<float> fq(128);
  FakeQuantizeNvfp4Rows(x.data(), 2, 64, gs, fq.data());
  std::vector<uint8_t> codes(64), scales(8);
  QuantizeNvfp4Rows(x.data(), 2, 64, gs, codes.data(), scales.data());
  EXPECT_EQ(scales[1], 0x20);  // the zero group's 0.125
  EXPECT_EQ(scales[2], 0x20);
  for (int i = 0; i < 128; ++i) {
    const uint8_t c = (i % 2) ? codes[i / 2] >> 4 : codes[i / 2] & 0xf;
    const float e = quant::E4M3ToF32(scales[i / 16]) / gs;
    const float deq = quant::E2M1ToF32(c) * e;
    uint32_t a, b;
    std::memcpy(&a, &deq, 4);
    std::memcpy(&b, &fq[i], 4);
    EXPECT_EQ(a, b) << i << ": " << deq << " vs " << fq[i];
  }
  EXPECT_EQ(codes[25] & 0xf, 0);  // NaN -> +0
  EXPECT_EQ(codes[35] & 0xf, 0x7);  // +inf -> 6
  EXPECT_EQ(codes[35] >> 4, 0xf);   // -inf -> -6
  EXPECT_EQ(scales[4], 0x7e);       // the inf group's scale saturates at 448
  EXPECT_EQ(codes[45] & 0xf, 0x8);  // -0 -> -0
}

TEST(FakeQuantizeFp8, RoundsThroughE4M3WithTheScale) {
  std::vector<float> x = {0.0f, 1.0f, 1.06f, -2.5f, 1000.0f};
  FakeQuantizeFp8(x.data(), 5, 0.5f);  // x / 0.5 -> e4m3 -> * 0.5
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 1.0f);
  EXPECT_EQ(x[2], 1.0f);     // 2.12 -> 2.0 (e4m3 spacing 0.25 in [2, 4))
  EXPECT_EQ(x[3], -2.5f);
  EXPECT_EQ(x[4], 224.0f);   // saturates at 448 * 0.5
}

TEST(QuantizedActivationSimulator, SubstitutesOnlyModulesWithAScale) {
  QuantizedActivationSimulator sim({{"a", 448.0f}}, {{"attn", {0.5f, 0.25f}}});
  std::vector<float> x(16, 0.3f);
  x[0] = 6.0f;
  const float* a = sim.OnLinearInput("a", x.data(), 1, 16);
  EXPECT_NE(a, x.data());
  EXPECT_EQ(a[1], 0.5f);
  EXPECT_EQ(a[0], 6.0f);
  EXPECT_EQ(sim.OnLinearInput("b", x.data(), 1, 16), x.data());
  EXPECT_EQ(x[1], 0.3f);  // the caller's input is untouched
  std::vector<float> k = {1.06f}, v = {1.06f};
  sim.OnKvWrite("attn", k.data(), v.data(), 1);
  EXPECT_EQ(k[0], 1.0f);   // 2.12 -> 2 (* 0.5)
  EXPECT_EQ(v[0], 1.0f);   // 4.24 -> 4 (* 0.25)
  std::vector<float> k2 = {1.06f}, v2 = {1.06f};
  sim.OnKvWrite("other", k2.data(), v2.data(), 1);
  EXPECT_EQ(k2[0], 1.06f);
}

}  // namespace
}  // namespace sparkserve::calib
