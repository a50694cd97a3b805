// E2M1 and E4M3FN codec tables: every code, rounding at and around every threshold/midpoint, NaN,
// saturation. Expected values come from the bit layouts, derived by hand or from an independent
// nearest-value search written here (the ml_dtypes oracle lives in tests/golden/test_quant_codecs.py).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------- E2M1

TEST(E2M1, DecodesAllSixteenCodes) {
  const float expected[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (int c = 0; c < 16; ++c) {
    const float v = E2M1ToF32(static_cast<uint8_t>(c));
    EXPECT_EQ(v, expected[c]) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << "code " << c;
  }
  EXPECT_EQ(E2M1ToF32(0xf7), 6.0f) << "high nibble ignored";
}

TEST(E2M1, EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(F32ToE2M1(E2M1ToF32(static_cast<uint8_t>(c))), c) << "code " << c;
}

struct Threshold {
  float t;
  uint8_t at, below, above;  // codes for t, the float just below, the float just above
};

TEST(E2M1, RoundsAtAndAroundEveryThreshold) {
  // FORMATS.md §3: <=0.25 -> 0, <0.75 -> 0.5, <=1.25 -> 1, <1.75 -> 1.5, <=2.5 -> 2, <3.5 -> 3, <=5 -> 4
  // (each threshold is a midpoint; ties go to the even mantissa).
  const Threshold table[] = {
      {0.25f, 0, 0, 1}, {0.75f, 2, 1, 2}, {1.25f, 2, 2, 3}, {1.75f, 4, 3, 4},
      {2.5f, 4, 4, 5},  {3.5f, 6, 5, 6},  {5.0f, 6, 6, 7},
  };
  for (const Threshold& th : table) {
    const float below = std::nextafter(th.t, 0.0f), above = std::nextafter(th.t, kInf);
    EXPECT_EQ(F32ToE2M1(th.t), th.at) << th.t;
    EXPECT_EQ(F32ToE2M1(below), th.below) << "just below " << th.t;
    EXPECT_EQ(F32ToE2M1(above), th.above) << "just above " << th.t;
    EXPECT_EQ(F32ToE2M1(-th.t), th.at | 8) << -th.t;
    EXPECT_EQ(F32ToE2M1(-below), th.below | 8) << "just above " << -th.t;
    EXPECT_EQ(F32ToE2M1(-above), th.above | 8) << "just below " << -th.t;
  }
}

TEST(E2M1, SaturatesAtSix) {
  EXPECT_EQ(F32ToE2M1(6.0f), 7);
  EXPECT_EQ(F32ToE2M1(std::nextafter(6.0f, kInf)), 7);
  EXPECT_EQ(F32ToE2M1(7.0f), 7);
  EXPECT_EQ(F32ToE2M1(1e30f), 7);
  EXPECT_EQ(F32ToE2M1(kInf), 7);
  EXPECT_EQ(F32ToE2M1(-1e30f), 15);
  EXPECT_EQ(F32ToE2M1(-kInf), 15);
}

TEST(E2M1, ZerosNegativeZerosAndNaN) {
  EXPECT_EQ(F32ToE2M1(0.0f), 0);
  EXPECT_EQ(F32ToE2M1(-0.0f), 8);
  EXPECT_EQ(F32ToE2M1(-0.1f), 8) << "a small negative rounds to -0";
  EXPECT_EQ(F32ToE2M1(1e-45f), 0);
  EXPECT_EQ(F32ToE2M1(kNaN), 0);
  EXPECT_EQ(F32ToE2M1(-kNaN), 0);
}

// Independent oracle: the nearest of the 8 magnitudes, ties to the even index (mantissa bit 0 clear).
uint8_t NearestE2M1(float x) {
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const double a = std::min(std::fabs(static_cast<double>(x)), 6.0);
  int best = 0;
  for (int i = 1; i < 8; ++i) {
    const double d = std::fabs(a - mags[i]), db = std::fabs(a - mags[best]);
    if (d < db || (d == db && (i & 1) == 0)) best = i;
  }
  return static_cast<uint8_t>((std::signbit(x) ? 8 : 0) | best);
}

TEST(E2M1, MatchesNearestEvenSearchOnADenseSweep) {
  for (float x = -7.0f; x <= 7.0f; x += 1.0f / 1024) {
    ASSERT_EQ(F32ToE2M1(x), NearestE2M1(x)) << x;
  }
}

TEST(E2M1, PacksLowNibbleFirst) {
  const std::vector<float> in = {0.5f, -6.0f, 3.0f, 0.0f};
  std::vector<uint8_t> packed(2);
  PackE2M1(in, packed);
  EXPECT_EQ(packed[0], 0xf1);  // element 0 (0.5 = 1) low, element 1 (-6 = 15) high
  EXPECT_EQ(packed[1], 0x05);
  std::vector<float> out(4);
  UnpackE2M1(packed, out);
  EXPECT_EQ(out, in);
}

// ---------------------------------------------------------------- E4M3FN

TEST(E4M3, DecodesHandPickedCodes) {
  EXPECT_EQ(E4M3ToF32(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(E4M3ToF32(0x80)) && E4M3ToF32(0x80) == 0.0f);
  EXPECT_EQ(E4M3ToF32(0x01), 0x1p-9f);        // smallest subnormal
  EXPECT_EQ(E4M3ToF32(0x07), 7 * 0x1p-9f);    // largest subnormal
  EXPECT_EQ(E4M3ToF32(0x08), 0x1p-6f);        // smallest normal
  EXPECT_EQ(E4M3ToF32(0x38), 1.0f);           // e=7 m=0
  EXPECT_EQ(E4M3ToF32(0x3c), 1.5f);           // e=7 m=4
  EXPECT_EQ(E4M3ToF32(0x40), 2.0f);
  EXPECT_EQ(E4M3ToF32(0xb8), -1.0f);
  EXPECT_EQ(E4M3ToF32(0x78), 256.0f);
  EXPECT_EQ(E4M3ToF32(0x7e), 448.0f);         // max finite
  EXPECT_EQ(E4M3ToF32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(E4M3ToF32(0x7f)));
  EXPECT_TRUE(std::isnan(E4M3ToF32(0xff)));
  EXPECT_TRUE(std::signbit(E4M3ToF32(0xff)));
}

TEST(E4M3, DecodesAll256CodesFromTheBitLayout) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const float v = E4M3ToF32(static_cast<uint8_t>(c));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(v)) << c;
      ++nans;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    EXPECT_EQ(static_cast<double>(v), s ? -mag : mag) << "code " << c;
    EXPECT_FALSE(std::isinf(v));
  }
  EXPECT_EQ(nans, 2);
  for (int c = 0; c < 0x7e; ++c) EXPECT_LT(E4M3ToF32(c), E4M3ToF32(c + 1)) << "monotonic at " << c;
}

TEST(E4M3, EncodeRoundTripsEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(F32ToE4M3(E4M3ToF32(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST(E4M3, RoundsToNearestEvenAtEveryMidpoint) {
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = E4M3ToF32(c), hi = E4M3ToF32(c + 1);
    const float mid = (lo + hi) / 2;  // exact in f32
    const uint8_t even = (c & 1) ? c + 1 : c;
    EXPECT_EQ(F32ToE4M3(mid), even) << "midpoint after code " << c;
    EXPECT_EQ(F32ToE4M3(std::nextafter(mid, 0.0f)), c) << "below midpoint after code " << c;
    EXPECT_EQ(F32ToE4M3(std::nextafter(mid, kInf)), c + 1) << "above midpoint after code " << c;
    EXPECT_EQ(F32ToE4M3(-mid), even | 0x80) << "negative midpoint after code " << c;
    EXPECT_EQ(F32ToE4M3(std::nextafter(-mid, 0.0f)), c | 0x80);
  }
}

TEST(E4M3, SaturatesAt448) {
  EXPECT_EQ(F32ToE4M3(448.0f), 0x7e);
  EXPECT_EQ(F32ToE4M3(449.0f), 0x7e);
  EXPECT_EQ(F32ToE4M3(464.0f), 0x7e);  // would round past the max without the clamp
  EXPECT_EQ(F32ToE4M3(1e30f), 0x7e);
  EXPECT_EQ(F32ToE4M3(kInf), 0x7e);
  EXPECT_EQ(F32ToE4M3(-500.0f), 0xfe);
  EXPECT_EQ(F32ToE4M3(-kInf), 0xfe);
}

TEST(E4M3, TinyValuesNaNAndZeros) {
  EXPECT_EQ(F32ToE4M3(0x1p-10f), 0x00) << "half the smallest subnormal ties to zero";
  EXPECT_EQ(F32ToE4M3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(F32ToE4M3(1e-30f), 0x00);
  EXPECT_EQ(F32ToE4M3(-1e-30f), 0x80);
  EXPECT_EQ(F32ToE4M3(1e-45f), 0x00);  // f32 subnormal input
  EXPECT_EQ(F32ToE4M3(-0.0f), 0x80);
  EXPECT_EQ(F32ToE4M3(kNaN), 0x7f);
  EXPECT_EQ(F32ToE4M3(-kNaN), 0xff);
}

TEST(E4M3, BulkConversions) {
  const std::vector<float> in = {1.0f, -2.0f, 448.0f, 0.0f};
  std::vector<uint8_t> codes(4);
  EncodeE4M3(in, codes);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0x38, 0xc0, 0x7e, 0x00}));
  std::vector<float> out(4);
  DecodeE4M3(codes, out);
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace sparkserve::quant
