// E2M1 ("fp4", the NVFP4 element type): decode every code, encode f32 with round-to-nearest-even
// and saturation at +-6, and pack/unpack two codes per byte. Header functions are plain inline math
// usable from CUDA (SPARKSERVE_HD) as well as the host.
//
// Code layout: bit 3 sign, bits 0-2 magnitude index into [0, 0.5, 1, 1.5, 2, 3, 4, 6]
// (exponent bits 1-2 with bias 1, mantissa bit 0; exponent 0 is subnormal: 0 or 0.5).
// Packing (compressed-tensors `weight_packed`): element 2j of a row is the LOW nibble of byte j,
// element 2j+1 the high nibble.
#pragma once
#include <cstdint>
#include <span>

#include "core/half.h"  // SPARKSERVE_HD, FloatBits, BitsFloat

namespace sparkserve::quant {

inline constexpr float kE2M1Max = 6.0f;

// Value of a 4-bit code (the high nibble of `code` is ignored). Code 8 is -0.0.
SPARKSERVE_HD inline float E2M1ToF32(uint8_t code) {
  const uint32_t e = (code >> 1) & 3u;
  const uint32_t m = code & 1u;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m)
                           : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (e - 1));
  return (code & 8u) ? -mag : mag;
}

// Nearest E2M1 code to `x`, ties to even, |x| > 6 saturating to +-6 (compressed-tensors clamps to
// [-6, 6] before rounding). The rounding thresholds on |x| (FORMATS.md §3):
//   <=0.25 -> 0, <0.75 -> 0.5, <=1.25 -> 1, <1.75 -> 1.5, <=2.5 -> 2, <3.5 -> 3, <=5 -> 4, else 6.
// The sign bit is the float's sign bit, so -0.0 and a small negative that rounds to zero give
// code 8 (-0), as IEEE conversion (and ml_dtypes, and the library's CPU packer) do.
// NaN has no E2M1 encoding: it gives code 0.
SPARKSERVE_HD inline uint8_t F32ToE2M1(float x) {
  if (x != x) return 0;
  const uint8_t sign = static_cast<uint8_t>((core::FloatBits(x) >> 28) & 8u);
  const float a = core::BitsFloat(core::FloatBits(x) & 0x7fffffffu);
  uint8_t i;
  if (a <= 0.25f) i = 0;
  else if (a < 0.75f) i = 1;
  else if (a <= 1.25f) i = 2;
  else if (a < 1.75f) i = 3;
  else if (a <= 2.5f) i = 4;
  else if (a < 3.5f) i = 5;
  else if (a <= 5.0f) i = 6;
  else i = 7;
  return static_cast<uint8_t>(sign | i);
}

// Two codes in one byte: `lo` is the even element, `hi` the odd one.
SPARKSERVE_HD inline uint8_t PackE2M1(uint8_t lo, uint8_t hi) {
  return static_cast<uint8_t>((lo & 0xfu) | ((hi & 0xfu) << 4));
}

// out[2j] = value of the low nibble of packed[j], out[2j+1] of its high nibble.
// Requires out.size() == 2 * packed.size().
void UnpackE2M1(std::span<const uint8_t> packed, std::span<float> out);

// packed[j] = PackE2M1(F32ToE2M1(in[2j]), F32ToE2M1(in[2j+1])). Requires in.size() == 2 * packed.size().
void PackE2M1(std::span<const float> in, std::span<uint8_t> packed);

}  // namespace sparkserve::quant
