// Partial rotary position embedding (rotate-half over the first rot_dim dims of each head).
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"

namespace sparkserve::kernels::cpu {

void ApplyPartialRope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t rot_dim,
                      std::span<const int32_t> positions, double theta) {
  const int64_t half = rot_dim / 2;
  // Angles in fp32 like the reference (inv_freq in fp32, times the position in fp32).
  std::vector<float> inv_freq(half), cos_t(half), sin_t(half);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / rot_dim));
  }
  for (int64_t t = 0; t < n; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float a = pos * inv_freq[i];
      cos_t[i] = std::cos(a);
      sin_t[i] = std::sin(a);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = xh[i], x2 = xh[i + half];
        xh[i] = x1 * cos_t[i] - x2 * sin_t[i];
        xh[i + half] = x2 * cos_t[i] + x1 * sin_t[i];
      }
    }
  }
}

}  // namespace sparkserve::kernels::cpu
