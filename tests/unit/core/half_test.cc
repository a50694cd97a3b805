// bf16/f16 conversions: exhaustive round trips and round-to-nearest-even at ties.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sparkserve::core {
namespace {

TEST(Half, Bf16RoundTripsEveryNonNanCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float f = Bf16ToF32(static_cast<uint16_t>(c));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(f))));
      continue;
    }
    EXPECT_EQ(F32ToBf16(f), c) << c;
  }
}

TEST(Half, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3*2^-8 lies between 1.0078125 (odd) and 1.015625 (even): goes up.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3.0f / 256)), 1.015625f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 1.1f / 256)), 1.0078125f);
}

TEST(Half, F16RoundTripsEveryNonNanCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float f = F16ToF32(static_cast<uint16_t>(c));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), c) << c;
  }
}

TEST(Half, F16KnownValuesAndRounding) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (0)
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp -> 2 (even)
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(NAN))));
}

}  // namespace
}  // namespace sparkserve::core
