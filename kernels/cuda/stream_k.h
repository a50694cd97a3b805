// Stream-K work split (the skinny linear, its tests): `units` (column block, K
// stage) pairs, column block major, dealt to `grid` blocks in equal contiguous ranges (one wave:
// every block resident at once). A block walks its range keeping fp32 accumulators; where a column
// block ends (or its range does) it writes them as piece p of that column block into partial plane
// p, p = block - (the block holding the column block's first unit). The block holding a column
// block's last unit also zeroes the planes past its own piece, so every plane of every output is
// written exactly once and SplitSum can add `planes` planes. No absl/fmt: nvcc compiles this.
#pragma once
#include <algorithm>
#include <cstdint>

namespace sparkserve::kernels::cuda {

#ifdef __CUDACC__
#define SPARKSERVE_STREAM_K_HD __host__ __device__
#else
#define SPARKSERVE_STREAM_K_HD
#endif

// First unit of block b (block b owns [StreamKUnitBegin(b), StreamKUnitBegin(b + 1))).
SPARKSERVE_STREAM_K_HD inline int64_t StreamKUnitBegin(int64_t b, int64_t units, int64_t grid) {
  return b * units / grid;
}
// The block whose range holds unit u (the largest b with StreamKUnitBegin(b) <= u).
SPARKSERVE_STREAM_K_HD inline int64_t StreamKBlockOfUnit(int64_t u, int64_t units, int64_t grid) {
  return ((u + 1) * grid - 1) / units;
}

// The partial planes a split of col_blocks x steps units over `grid` blocks writes: the most pieces
// any column block is cut into (1 when steps < 1).
inline int StreamKPlanes(int64_t col_blocks, int64_t steps, int64_t grid) {
  int planes = 1;
  const int64_t units = col_blocks * steps;
  for (int64_t c = 0; c < col_blocks && steps > 0; ++c) {
    const int64_t first = StreamKBlockOfUnit(c * steps, units, grid);
    const int64_t last = StreamKBlockOfUnit(c * steps + steps - 1, units, grid);
    planes = std::max(planes, static_cast<int>(last - first + 1));
  }
  return planes;
}

}  // namespace sparkserve::kernels::cuda
