// RMSNorm (zero-centred and GDN-gated), residual-add + norm, L2 normalisation (CPU fp32).
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace sparkserve::kernels::cpu {
namespace {

int64_t RowGrain(int64_t dim) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)); }

inline float InvRms(const float* x, int64_t dim, float eps) {
  return 1.0f / std::sqrt(vec::SumSquares(x, dim) / static_cast<float>(dim) + eps);
}

}  // namespace

void RmsNormZeroCentered(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                         float* out) {
  core::ThreadPool::Global().ParallelFor(rows, RowGrain(dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * dim;
      float* o = out + r * dim;
      const float inv = InvRms(xr, dim, eps);
      for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * (1.0f + w[i]);
    }
  });
}

void AddRmsNormZeroCentered(float* residual, const float* delta, const float* w, int64_t rows,
                            int64_t dim, float eps, float* out) {
  core::ThreadPool::Global().ParallelFor(rows, RowGrain(dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* xr = residual + r * dim;
      const float* d = delta + r * dim;
      for (int64_t i = 0; i < dim; ++i) xr[i] += d[i];
      float* o = out + r * dim;
      const float inv = InvRms(xr, dim, eps);
      for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] * inv) * (1.0f + w[i]);
    }
  });
}

void GatedRmsNorm(const float* x, const float* z, const float* w, int64_t rows, int64_t dim,
                  float eps, float* out) {
  core::ThreadPool::Global().ParallelFor(rows, RowGrain(dim), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * dim;
      const float* zr = z + r * dim;
      float* o = out + r * dim;
      const float inv = InvRms(xr, dim, eps);
      for (int64_t i = 0; i < dim; ++i) o[i] = (w[i] * (xr[i] * inv)) * Silu(zr[i]);
    }
  });
}

void L2NormalizeRows(float* x, int64_t rows, int64_t dim, int64_t stride, float eps, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * stride;
    const float inv = 1.0f / std::sqrt(vec::SumSquares(xr, dim) + eps);
    for (int64_t i = 0; i < dim; ++i) xr[i] = (xr[i] * inv) * scale;
  }
}

}  // namespace sparkserve::kernels::cpu
