// Small inline vector helpers shared by the CPU ops: loops written so GCC vectorises them at -O3
// without -ffast-math (eight independent accumulators instead of one serial float sum).
#pragma once
#include <cstdint>

namespace sparkserve::kernels::cpu::vec {

inline float Dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline float SumSquares(const float* __restrict a, int64_t n) { return Dot(a, a, n); }

// y += a * x
inline void Axpy(float a, const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace sparkserve::kernels::cpu::vec
