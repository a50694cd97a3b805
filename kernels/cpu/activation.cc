// Elementwise activations and gates: SiLU, SwiGLU, sigmoid gate, residual add, GDN gates.
#include <cmath>

#include "kernels/cpu/ops.h"

namespace sparkserve::kernels::cpu {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void SwiGlu(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = Silu(gate[i]) * up[i];
}

void MulSigmoid(float* x, const float* gate, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

void AddInPlace(float* x, const float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void GdnGates(const float* a, const float* b, const float* a_log, const float* dt_bias, int64_t n,
              int64_t nv, float* g, float* beta) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < nv; ++j) {
      const int64_t i = t * nv + j;
      const float x = a[i] + dt_bias[j];
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold
      g[i] = -std::exp(a_log[j]) * softplus;
      beta[i] = 1.0f / (1.0f + std::exp(-b[i]));
    }
  }
}

}  // namespace sparkserve::kernels::cpu
