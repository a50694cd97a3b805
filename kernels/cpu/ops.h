// CPU reference ops (fp32) for Qwen3.5: the declarations of every op the model runs. Each op lives
// in the .cc named in its section. Row-major everywhere; shapes in comments; `n` counts tokens.
// Ops that carry per-sequence state take a ragged batch (RaggedSeq) and parallelise across
// sequences x heads/channels on core::ThreadPool::Global().
#pragma once
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace sparkserve::kernels::cpu {

// ---- embedding.cc ----
// out[i, :] = table[ids[i], :]. table [vocab, dim], out [n, dim]. Fails on ids outside [0, vocab).
absl::Status EmbeddingGather(const float* table, int64_t vocab, int64_t dim,
                             std::span<const int32_t> ids, float* out);

// ---- norm.cc ----
// Zero-centred RMSNorm (Qwen3.5 layer/final/q/k/MTP norms): out = x / rms(x) * (1 + w).
// x, out [rows, dim] (out may alias x); w [dim].
void RmsNormZeroCentered(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                         float* out);
// residual += delta, then out = RmsNormZeroCentered(residual). residual, delta, out [rows, dim].
void AddRmsNormZeroCentered(float* residual, const float* delta, const float* w, int64_t rows,
                            int64_t dim, float eps, float* out);
// GDN gated norm: out = w * x / rms(x) * silu(z). x, z, out [rows, dim] (out may alias x); w [dim].
void GatedRmsNorm(const float* x, const float* z, const float* w, int64_t rows, int64_t dim,
                  float eps, float* out);
// x[r, :] *= rsqrt(sum(x[r, :]^2) + eps) * scale, for rows of `dim` elements spaced `stride` apart.
void L2NormalizeRows(float* x, int64_t rows, int64_t dim, int64_t stride, float eps, float scale);

// ---- linear.cc ----
// y = x W^T over a batch of rows. x [rows, in], w [out, in], y [rows, out]. One pass over the
// weights for all rows (each weight row is read once; rows are the inner loop); threads split
// output features. Every call counts one weight pass (LinearPassCount).
void Linear(const float* x, int64_t rows, int64_t in, const float* w, int64_t out, float* y);
// Weight passes made by Linear since the process started (tests count passes per step).
int64_t LinearPassCount();

// ---- rope.cc ----
// Partial rotary embedding (rotate-half) on the first `rot_dim` dims of each head, in place.
// x [n, heads, head_dim]; positions [n]; pairs (i, i + rot_dim/2) rotate by pos * theta^(-2i/rot_dim).
void ApplyPartialRope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t rot_dim,
                      std::span<const int32_t> positions, double theta);

// ---- activation.cc ----
float Silu(float x);
// out = silu(gate) * up, all [count].
void SwiGlu(const float* gate, const float* up, int64_t count, float* out);
// x *= sigmoid(gate), all [count].
void MulSigmoid(float* x, const float* gate, int64_t count);
// x += y, all [count].
void AddInPlace(float* x, const float* y, int64_t count);
// GDN gates per token and value head: beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias).
// a, b, g, beta [n, nv]; a_log, dt_bias [nv].
void GdnGates(const float* a, const float* b, const float* a_log, const float* dt_bias, int64_t n,
              int64_t nv, float* g, float* beta);

// ---- sampling.cc ----
// Index of the largest value (the first one on ties).
int32_t Argmax(const float* x, int64_t count);
// out = x - logsumexp(x), all [count] (out may alias x).
void LogSoftmax(const float* x, int64_t count, float* out);

// A sequence's share of a ragged batch: tokens [token_begin, token_begin + num_tokens) of the
// step, the first at position `start_pos`.
struct RaggedSeq {
  int64_t token_begin = 0;
  int64_t num_tokens = 0;
  int64_t start_pos = 0;
};

// ---- conv1d.cc ----
// Causal depthwise conv1d + SiLU with a carried window, per sequence:
//   out[t, c] = silu(sum_j w[c, j] * in[t - (K-1) + j, c]), in[<0] taken from window[s] (oldest first).
// x, out [n_total, channels] (row stride `x_stride`/`channels`); w [channels, K];
// window[s] [channels, K-1] updated to the last K-1 inputs. When column_windows[s] is non-null it
// receives the window after every token of that sequence: [num_tokens, channels, K-1].
void CausalConv1dSilu(const float* x, int64_t x_stride, int64_t channels, const float* w, int64_t K,
                      std::span<const RaggedSeq> seqs, std::span<float* const> window,
                      std::span<float* const> column_windows, float* out);

// ---- gated_delta.cc ----
// Gated delta rule recurrence per sequence and value head j (key head j / (nv/nk)), fp32 state:
//   S *= exp(g); kv = S^T k; delta = beta * (v - kv); S += k delta^T; o = S^T q.
// q, k: rows of the step with nk heads of dk at q + t*qk_stride (already L2-normed, q scaled);
// v: nv heads of dv at v + t*v_stride; g, beta [n_total, nv]; out [n_total, nv, dv];
// state[s] [nv, dk, dv]; column_states[s] (optional) receives the state after every token:
// [num_tokens, nv, dk, dv].
void GatedDeltaRule(const float* q, const float* k, int64_t qk_stride, const float* v,
                    int64_t v_stride, const float* g, const float* beta, int64_t nk, int64_t nv,
                    int64_t dk, int64_t dv, std::span<const RaggedSeq> seqs,
                    std::span<float* const> state, std::span<float* const> column_states,
                    float* out);

// ---- attention.cc ----
// A paged KV cache of one attention layer: K and V pools [num_pages, page_size, kv_heads, head_dim].
struct KvPool {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_pages = 0;
  int64_t page_size = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};
// Writes each sequence's new k/v rows ([n_total, kv_heads, head_dim]) at positions
// start_pos.. through its page table (pages[s][pos / page_size]). Fails on a page id out of range
// or a table too short.
absl::Status WriteKv(const KvPool& pool, const float* k, const float* v,
                     std::span<const RaggedSeq> seqs, std::span<const std::span<const int32_t>> pages);
// Causal GQA attention over the paged cache (which must already hold the step's own k/v):
// token t of sequence s (position p) attends to positions [0, p]; query head h uses kv head
// h / (heads / kv_heads); scores scaled by `scale`, softmax in fp32. q, out [n_total, heads, head_dim].
void PagedAttention(const KvPool& pool, const float* q, int64_t heads, float scale,
                    std::span<const RaggedSeq> seqs, std::span<const std::span<const int32_t>> pages,
                    float* out);

}  // namespace sparkserve::kernels::cpu
