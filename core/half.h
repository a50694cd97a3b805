// bf16 and f16 <-> f32 conversions (round to nearest even), host and device.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SPARKSERVE_HD __host__ __device__
#else
#define SPARKSERVE_HD
#endif

namespace sparkserve::core {

SPARKSERVE_HD inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
SPARKSERVE_HD inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

SPARKSERVE_HD inline float Bf16ToF32(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

SPARKSERVE_HD inline uint16_t F32ToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

SPARKSERVE_HD inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // zero or subnormal: man * 2^-24
    float v = static_cast<float>(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (man << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (man << 13));
}

SPARKSERVE_HD inline uint16_t F32ToF16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;                 // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;                // overflow (>= 65520) -> inf
  if (a < 0x38800000u) {                                      // below smallest normal 2^-14
    // subnormal: value / 2^-24, rounded to nearest even
    const float v = BitsFloat(a) * 16777216.0f;               // exact scaling by 2^24
    uint32_t q = static_cast<uint32_t>(v);
    const float rem = v - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return sign | static_cast<uint16_t>(q);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);                 // round mantissa to 10 bits
  return sign | static_cast<uint16_t>(((r >> 13) - (112u << 10)));
}

}  // namespace sparkserve::core
