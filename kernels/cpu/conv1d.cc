// Causal depthwise conv1d + SiLU with a carried (K-1)-wide window per sequence (prefill chunks,
// decode steps and MTP verify columns are the same code with different token counts).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ragged.h"

namespace sparkserve::kernels::cpu {

void CausalConv1dSilu(const float* x, int64_t x_stride, int64_t channels, const float* w, int64_t K,
                      std::span<const RaggedSeq> seqs, std::span<float* const> window,
                      std::span<float* const> column_windows, float* out) {
  const int64_t W = K - 1;
  constexpr int64_t kChannelBlock = 16;
  const int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  std::vector<int64_t> counts(seqs.size(), blocks);
  const RaggedItems items(counts);
  core::ThreadPool::Global().ParallelFor(items.total(), 1, [&](int64_t b, int64_t e) {
    std::vector<float> buf;
    for (int64_t item = b; item < e; ++item) {
      const auto [s, blk] = items.Locate(item);
      const RaggedSeq& sq = seqs[s];
      const int64_t n = sq.num_tokens;
      float* win = window[s];
      float* cols = column_windows.empty() ? nullptr : column_windows[s];
      buf.resize(W + n);
      const int64_t c_end = std::min(channels, (blk + 1) * kChannelBlock);
      for (int64_t c = blk * kChannelBlock; c < c_end; ++c) {
        // buf = [window (oldest first) | this chunk's inputs]
        for (int64_t j = 0; j < W; ++j) buf[j] = win[c * W + j];
        for (int64_t t = 0; t < n; ++t) buf[W + t] = x[(sq.token_begin + t) * x_stride + c];
        const float* wc = w + c * K;
        for (int64_t t = 0; t < n; ++t) {
          float acc = 0.0f;
          for (int64_t j = 0; j < K; ++j) acc += wc[j] * buf[t + j];
          out[(sq.token_begin + t) * channels + c] = Silu(acc);
          if (cols) std::memcpy(cols + (t * channels + c) * W, buf.data() + t + 1, sizeof(float) * W);
        }
        std::memcpy(win + c * W, buf.data() + n, sizeof(float) * W);
      }
    }
  });
}

}  // namespace sparkserve::kernels::cpu
