// The gated delta rule recurrence (Gated DeltaNet core), sequential per token, fp32 state per
// sequence and value head. Threads split (sequence, value head) pairs.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ragged.h"
#include "kernels/cpu/vec.h"

namespace sparkserve::kernels::cpu {

void GatedDeltaRule(const float* q, const float* k, int64_t qk_stride, const float* v,
                    int64_t v_stride, const float* g, const float* beta, int64_t nk, int64_t nv,
                    int64_t dk, int64_t dv, std::span<const RaggedSeq> seqs,
                    std::span<float* const> state, std::span<float* const> column_states,
                    float* out) {
  const int64_t group = nv / nk;  // value heads per key head
  const int64_t head_state = dk * dv;
  std::vector<int64_t> counts(seqs.size(), nv);
  const RaggedItems items(counts);
  core::ThreadPool::Global().ParallelFor(items.total(), 1, [&](int64_t b, int64_t e) {
    std::vector<float> kv(dv), delta(dv);
    for (int64_t item = b; item < e; ++item) {
      const auto [s, j] = items.Locate(item);
      const RaggedSeq& sq = seqs[s];
      float* S = state[s] + j * head_state;  // [dk, dv]
      float* cols = column_states.empty() ? nullptr : column_states[s];
      const int64_t kh = j / group;
      for (int64_t t = 0; t < sq.num_tokens; ++t) {
        const int64_t row = sq.token_begin + t;
        const float* qt = q + row * qk_stride + kh * dk;
        const float* kt = k + row * qk_stride + kh * dk;
        const float* vt = v + row * v_stride + j * dv;
        const float decay = std::exp(g[row * nv + j]);
        const float bt = beta[row * nv + j];
        // S *= exp(g); kv = S^T k
        std::fill(kv.begin(), kv.end(), 0.0f);
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = S + i * dv;
          for (int64_t c = 0; c < dv; ++c) Si[c] *= decay;
          vec::Axpy(kt[i], Si, kv.data(), dv);
        }
        for (int64_t c = 0; c < dv; ++c) delta[c] = (vt[c] - kv[c]) * bt;
        // S += k delta^T; o = S^T q
        float* o = out + (row * nv + j) * dv;
        std::fill(o, o + dv, 0.0f);
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = S + i * dv;
          vec::Axpy(kt[i], delta.data(), Si, dv);
          vec::Axpy(qt[i], Si, o, dv);
        }
        if (cols) std::memcpy(cols + (t * nv + j) * head_state, S, sizeof(float) * head_state);
      }
    }
  });
}

}  // namespace sparkserve::kernels::cpu
