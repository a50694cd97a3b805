// Dense linear y = x W^T over a batch of rows (CPU fp32): one pass over the weights per call.
#include <algorithm>
#include <atomic>

#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace sparkserve::kernels::cpu {
namespace {
std::atomic<int64_t> g_linear_passes{0};
}  // namespace

void Linear(const float* x, int64_t rows, int64_t in, const float* w, int64_t out, float* y) {
  g_linear_passes.fetch_add(1, std::memory_order_relaxed);
  if (rows <= 0 || out <= 0) return;
  // Enough multiply-adds per chunk to pay for a hand-off to another thread.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, in * rows));
  core::ThreadPool::Global().ParallelFor(out, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const float* wr = w + o * in;  // read once for all rows
      for (int64_t r = 0; r < rows; ++r) y[r * out + o] = vec::Dot(x + r * in, wr, in);
    }
  });
}

int64_t LinearPassCount() { return g_linear_passes.load(std::memory_order_relaxed); }

}  // namespace sparkserve::kernels::cpu
