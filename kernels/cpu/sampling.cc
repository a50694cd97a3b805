// Argmax and log-softmax over a logits row (CPU fp32).
#include <cmath>

#include "kernels/cpu/ops.h"

namespace sparkserve::kernels::cpu {

int32_t Argmax(const float* x, int64_t count) {
  int64_t best = 0;
  for (int64_t i = 1; i < count; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

void LogSoftmax(const float* x, int64_t count, float* out) {
  float m = x[0];
  for (int64_t i = 1; i < count; ++i) m = std::max(m, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += std::exp(static_cast<double>(x[i] - m));
  const float lse = m + static_cast<float>(std::log(sum));
  for (int64_t i = 0; i < count; ++i) out[i] = x[i] - lse;
}

}  // namespace sparkserve::kernels::cpu
