// E4M3FN ("fp8", float8_e4m3fn): decode every code and encode f32 with round-to-nearest-even and
// saturation at +-448. Header functions are plain inline math usable from CUDA (SPARKSERVE_HD).
//
// Code layout: bit 7 sign, bits 3-6 exponent (bias 7), bits 0-2 mantissa. Exponent 0 is subnormal
// (m * 2^-9). No infinities: 0x7f and 0xff are NaN; the largest finite value is 0x7e = 448.
#pragma once
#include <cstdint>
#include <span>

#include "core/half.h"  // SPARKSERVE_HD, FloatBits, BitsFloat

namespace sparkserve::quant {

inline constexpr float kE4M3Max = 448.0f;

// Value of an E4M3FN code; 0x7f/0xff give a quiet NaN carrying the code's sign.
SPARKSERVE_HD inline float E4M3ToF32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t e = (code >> 3) & 0xfu;
  const uint32_t m = code & 7u;
  if (e == 15 && m == 7) return core::BitsFloat(sign | 0x7fc00000u);
  if (e == 0) {
    const float v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9, exact
    return sign ? -v : v;
  }
  return core::BitsFloat(sign | ((e + 120u) << 23) | (m << 20));
}

// Nearest E4M3FN code to `x`, ties to even, with |x| >= 448 (and +-inf) saturating to +-448: the
// compressed-tensors producers clamp to [-448, 448] before the cast. NaN gives 0x7f / 0xff (by sign).
SPARKSERVE_HD inline uint8_t F32ToE4M3(float x) {
  const uint32_t u = core::FloatBits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;    // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;   // >= 448 (inf included): saturate
  if (a < 0x3c800000u) {                       // below 2^-6, the smallest normal: subnormal range
    const float v = core::BitsFloat(a) * 512.0f;  // |x| / 2^-9, exact
    uint32_t q = static_cast<uint32_t>(v);
    const float rem = v - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;  // q == 8 is the smallest normal, 0x08
    return static_cast<uint8_t>(sign | q);
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding to nearest even; a carry bumps the exponent.
  const uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
  return static_cast<uint8_t>(sign | (r - (120u << 3)));
}

// out[i] = E4M3ToF32(in[i]); sizes must match.
void DecodeE4M3(std::span<const uint8_t> in, std::span<float> out);
// out[i] = F32ToE4M3(in[i]); sizes must match.
void EncodeE4M3(std::span<const float> in, std::span<uint8_t> out);

}  // namespace sparkserve::quant
