// Causal GQA attention over a paged KV cache (CPU fp32), and the KV write that precedes it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ragged.h"
#include "kernels/cpu/vec.h"

namespace sparkserve::kernels::cpu {

absl::Status WriteKv(const KvPool& pool, const float* k, const float* v,
                     std::span<const RaggedSeq> seqs, std::span<const std::span<const int32_t>> pages) {
  const int64_t row = pool.kv_heads * pool.head_dim;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const RaggedSeq& sq = seqs[s];
    for (int64_t t = 0; t < sq.num_tokens; ++t) {
      const int64_t pos = sq.start_pos + t;
      const int64_t p = pos / pool.page_size;
      if (p >= static_cast<int64_t>(pages[s].size())) {
        return absl::InvalidArgumentError(fmt::format(
            "sequence {}: position {} needs KV page {} but its page table has {} pages", s, pos, p,
            pages[s].size()));
      }
      const int32_t page = pages[s][p];
      if (page < 0 || page >= pool.num_pages) {
        return absl::InvalidArgumentError(
            fmt::format("sequence {}: KV page id {} outside the pool [0, {})", s, page, pool.num_pages));
      }
      const int64_t off = (static_cast<int64_t>(page) * pool.page_size + pos % pool.page_size) * row;
      std::memcpy(pool.k + off, k + (sq.token_begin + t) * row, sizeof(float) * row);
      std::memcpy(pool.v + off, v + (sq.token_begin + t) * row, sizeof(float) * row);
    }
  }
  return absl::OkStatus();
}

void PagedAttention(const KvPool& pool, const float* q, int64_t heads, float scale,
                    std::span<const RaggedSeq> seqs, std::span<const std::span<const int32_t>> pages,
                    float* out) {
  const int64_t hd = pool.head_dim;
  const int64_t group = heads / pool.kv_heads;
  const int64_t kv_row = pool.kv_heads * hd;
  std::vector<int64_t> counts(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) counts[s] = seqs[s].num_tokens * heads;
  const RaggedItems items(counts);
  core::ThreadPool::Global().ParallelFor(items.total(), 1, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t item = b; item < e; ++item) {
      const auto [s, th] = items.Locate(item);
      const RaggedSeq& sq = seqs[s];
      const int64_t t = th / heads, h = th % heads, kh = h / group;
      const int64_t pos = sq.start_pos + t;
      const float* qh = q + ((sq.token_begin + t) * heads + h) * hd;
      float* o = out + ((sq.token_begin + t) * heads + h) * hd;
      scores.resize(pos + 1);
      float m = -INFINITY;
      for (int64_t p = 0; p <= pos; ++p) {
        const int64_t off =
            (static_cast<int64_t>(pages[s][p / pool.page_size]) * pool.page_size + p % pool.page_size) *
                kv_row + kh * hd;
        scores[p] = vec::Dot(qh, pool.k + off, hd) * scale;
        m = std::max(m, scores[p]);
      }
      float sum = 0.0f;
      for (int64_t p = 0; p <= pos; ++p) {
        scores[p] = std::exp(scores[p] - m);
        sum += scores[p];
      }
      const float inv = 1.0f / sum;
      std::fill(o, o + hd, 0.0f);
      for (int64_t p = 0; p <= pos; ++p) {
        const int64_t off =
            (static_cast<int64_t>(pages[s][p / pool.page_size]) * pool.page_size + p % pool.page_size) *
                kv_row + kh * hd;
        vec::Axpy(scores[p] * inv, pool.v + off, o, hd);
      }
    }
  });
}

}  // namespace sparkserve::kernels::cpu
