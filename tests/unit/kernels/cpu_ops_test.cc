// Tests of the CPU reference ops against naive double-precision formulas written here, and of
// the state-carrying ops (conv window, delta-rule state, paged KV) for chunking invariance.
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"

namespace sparkserve::kernels::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double SiluD(double x) { return x / (1.0 + std::exp(-x)); }

TEST(CpuOps, LinearMatchesNaiveAndCountsOnePassPerCall) {
  const int rows = 5, in = 37, out = 29;
  auto x = Random(rows * in, 1), w = Random(out * in, 2);
  std::vector<float> y(rows * out);
  const int64_t before = LinearPassCount();
  Linear(x.data(), rows, in, w.data(), out, y.data());
  EXPECT_EQ(LinearPassCount() - before, 1);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0;
      for (int i = 0; i < in; ++i) acc += double(x[r * in + i]) * w[o * in + i];
      EXPECT_NEAR(y[r * out + o], acc, 1e-4);
    }
  // A row's result does not depend on the other rows of the batch (bitwise).
  std::vector<float> y1(out);
  Linear(x.data() + 3 * in, 1, in, w.data(), out, y1.data());
  for (int o = 0; o < out; ++o) EXPECT_EQ(y1[o], y[3 * out + o]);
}

TEST(CpuOps, NormsMatchFormulas) {
  const int rows = 3, dim = 24;
  auto x = Random(rows * dim, 3), w = Random(dim, 4, 0.3f), z = Random(rows * dim, 5);
  std::vector<float> a(rows * dim), g(rows * dim);
  RmsNormZeroCentered(x.data(), w.data(), rows, dim, 1e-6f, a.data());
  GatedRmsNorm(x.data(), z.data(), w.data(), rows, dim, 1e-6f, g.data());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int i = 0; i < dim; ++i) {
      EXPECT_NEAR(a[r * dim + i], x[r * dim + i] * inv * (1.0 + w[i]), 1e-5);
      EXPECT_NEAR(g[r * dim + i], w[i] * x[r * dim + i] * inv * SiluD(z[r * dim + i]), 1e-5);
    }
  }
  // Residual add + norm = add, then norm.
  auto res = x;
  auto delta = Random(rows * dim, 6);
  std::vector<float> fused(rows * dim), ref(rows * dim);
  AddRmsNormZeroCentered(res.data(), delta.data(), w.data(), rows, dim, 1e-6f, fused.data());
  auto sum = x;
  AddInPlace(sum.data(), delta.data(), rows * dim);
  RmsNormZeroCentered(sum.data(), w.data(), rows, dim, 1e-6f, ref.data());
  EXPECT_EQ(res, sum);
  EXPECT_EQ(fused, ref);
  // L2 normalisation with stride and scale.
  auto l2 = Random(2 * 10, 7);
  L2NormalizeRows(l2.data(), 2, 8, 10, 1e-6f, 0.5f);
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int i = 0; i < 8; ++i) ss += double(l2[r * 10 + i]) * l2[r * 10 + i];
    EXPECT_NEAR(std::sqrt(ss), 0.5, 1e-5);
  }
}

TEST(CpuOps, PartialRopeRotatesPairsAndLeavesTheRest) {
  const int heads = 2, hd = 12, rot = 6;
  auto x = Random(2 * heads * hd, 8);
  auto y = x;
  const std::vector<int32_t> pos = {0, 7};
  ApplyPartialRope(y.data(), 2, heads, hd, rot, pos, 10000.0);
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < heads; ++h) {
      const float* a = x.data() + (t * heads + h) * hd;
      const float* b = y.data() + (t * heads + h) * hd;
      for (int i = 0; i < rot / 2; ++i) {
        const double ang = pos[t] / std::pow(10000.0, 2.0 * i / rot);
        EXPECT_NEAR(b[i], a[i] * std::cos(ang) - a[i + 3] * std::sin(ang), 1e-5);
        EXPECT_NEAR(b[i + 3], a[i + 3] * std::cos(ang) + a[i] * std::sin(ang), 1e-5);
      }
      for (int i = rot; i < hd; ++i) EXPECT_EQ(b[i], a[i]);
    }
}

TEST(CpuOps, CausalConvChunkedEqualsWholeAndNaive) {
  const int C = 5, K = 4, n = 9;
  auto x = Random(n * C, 9), w = Random(C * K, 10, 0.5f);
  std::vector<float> win(C * (K - 1), 0.0f), out(n * C);
  std::vector<RaggedSeq> one = {{0, n, 0}};
  std::vector<float*> wins = {win.data()};
  CausalConv1dSilu(x.data(), C, C, w.data(), K, one, wins, {}, out.data());
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < K; ++j) {
        const int src = t - (K - 1) + j;
        if (src >= 0) acc += double(w[c * K + j]) * x[src * C + c];
      }
      EXPECT_NEAR(out[t * C + c], SiluD(acc), 1e-5);
    }
  // Chunks 4 + 1 + 4 with column windows kept for the last chunk.
  std::vector<float> win2(C * (K - 1), 0.0f), out2(n * C), cols(4 * C * (K - 1));
  std::vector<float*> wins2 = {win2.data()};
  std::vector<RaggedSeq> parts[3] = {{{0, 4, 0}}, {{4, 1, 4}}, {{5, 4, 5}}};
  CausalConv1dSilu(x.data(), C, C, w.data(), K, parts[0], wins2, {}, out2.data());
  CausalConv1dSilu(x.data(), C, C, w.data(), K, parts[1], wins2, {}, out2.data());
  std::vector<float*> colp = {cols.data()};
  CausalConv1dSilu(x.data(), C, C, w.data(), K, parts[2], wins2, colp, out2.data());
  EXPECT_EQ(out, out2);
  EXPECT_EQ(win, win2);
  // The column window after the chunk's last token is the final window; after token 0 it holds
  // inputs 3..5 (positions t-2..t).
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < K - 1; ++j) {
      EXPECT_EQ(cols[(3 * C + c) * (K - 1) + j], win[c * (K - 1) + j]);
      EXPECT_EQ(cols[(0 * C + c) * (K - 1) + j], x[(3 + j) * C + c]);
    }
}

TEST(CpuOps, GatedDeltaRuleMatchesNaiveAndIsChunkInvariant) {
  const int nk = 2, nv = 4, dk = 8, dv = 6, n = 7;
  const int qk_stride = 2 * nk * dk + nv * dv;  // rows laid out [q | k | v]
  auto row = Random(n * qk_stride, 11, 0.4f);
  auto g = Random(n * nv, 12, 0.3f);
  for (auto& x : g) x = -std::abs(x);
  auto beta = Random(n * nv, 13);
  for (auto& x : beta) x = 1.0f / (1.0f + std::exp(-x));
  const float* q = row.data();
  const float* k = row.data() + nk * dk;
  const float* v = row.data() + 2 * nk * dk;
  std::vector<float> S(nv * dk * dv, 0.0f), out(n * nv * dv);
  std::vector<RaggedSeq> one = {{0, n, 0}};
  std::vector<float*> st = {S.data()};
  GatedDeltaRule(q, k, qk_stride, v, qk_stride, g.data(), beta.data(), nk, nv, dk, dv, one, st, {},
                 out.data());
  // Naive double recurrence.
  std::vector<double> R(nv * dk * dv, 0.0);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < nv; ++j) {
      const int kh = j / (nv / nk);
      double* Sj = R.data() + j * dk * dv;
      const float* qt = q + t * qk_stride + kh * dk;
      const float* kt = k + t * qk_stride + kh * dk;
      const float* vt = v + t * qk_stride + j * dv;
      for (int i = 0; i < dk * dv; ++i) Sj[i] *= std::exp(double(g[t * nv + j]));
      for (int c = 0; c < dv; ++c) {
        double kv = 0;
        for (int i = 0; i < dk; ++i) kv += Sj[i * dv + c] * kt[i];
        const double d = beta[t * nv + j] * (vt[c] - kv);
        for (int i = 0; i < dk; ++i) Sj[i * dv + c] += kt[i] * d;
      }
      for (int c = 0; c < dv; ++c) {
        double o = 0;
        for (int i = 0; i < dk; ++i) o += Sj[i * dv + c] * qt[i];
        EXPECT_NEAR(out[(t * nv + j) * dv + c], o, 1e-5);
      }
    }
  for (size_t i = 0; i < R.size(); ++i) EXPECT_NEAR(S[i], R[i], 1e-5);
  // Split 3 + 4, keeping column states in the second part: same outputs and final state.
  std::vector<float> S2(S.size(), 0.0f), out2(out.size()), cols(4 * S.size());
  std::vector<float*> st2 = {S2.data()}, colp = {cols.data()};
  std::vector<RaggedSeq> a = {{0, 3, 0}}, b = {{3, 4, 3}};
  GatedDeltaRule(q, k, qk_stride, v, qk_stride, g.data(), beta.data(), nk, nv, dk, dv, a, st2, {},
                 out2.data());
  GatedDeltaRule(q, k, qk_stride, v, qk_stride, g.data(), beta.data(), nk, nv, dk, dv, b, st2, colp,
                 out2.data());
  EXPECT_EQ(out, out2);
  EXPECT_EQ(S, S2);
  EXPECT_TRUE(std::equal(S.begin(), S.end(), cols.begin() + 3 * S.size()));
}

TEST(CpuOps, PagedAttentionMatchesDenseCausalGqa) {
  const int heads = 4, kvh = 2, hd = 8, n = 6, P = 4;
  KvPool pool;
  std::vector<float> kp(5 * P * kvh * hd, NAN), vp(5 * P * kvh * hd, NAN);
  pool = {kp.data(), vp.data(), 5, P, kvh, hd};
  auto q = Random(n * heads * hd, 14), k = Random(n * kvh * hd, 15), v = Random(n * kvh * hd, 16);
  const std::vector<int32_t> table = {3, 1};  // scattered pages
  std::vector<std::span<const int32_t>> pages = {table};
  // Two chunks: 4 tokens then 2 (the second attends to the first through the cache).
  std::vector<float> out(n * heads * hd);
  std::vector<RaggedSeq> c1 = {{0, 4, 0}}, c2 = {{4, 2, 4}};
  ASSERT_TRUE(WriteKv(pool, k.data(), v.data(), c1, pages).ok());
  PagedAttention(pool, q.data(), heads, 0.3f, c1, pages, out.data());
  ASSERT_TRUE(WriteKv(pool, k.data(), v.data(), c2, pages).ok());
  PagedAttention(pool, q.data(), heads, 0.3f, c2, pages, out.data());
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      const int kh = h / (heads / kvh);
      std::vector<double> s(t + 1);
      double m = -1e30, sum = 0;
      for (int p = 0; p <= t; ++p) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[(t * heads + h) * hd + i]) * k[(p * kvh + kh) * hd + i];
        s[p] = d * 0.3;
        m = std::max(m, s[p]);
      }
      for (auto& x : s) sum += (x = std::exp(x - m));
      for (int i = 0; i < hd; ++i) {
        double o = 0;
        for (int p = 0; p <= t; ++p) o += s[p] / sum * v[(p * kvh + kh) * hd + i];
        EXPECT_NEAR(out[(t * heads + h) * hd + i], o, 1e-5);
      }
    }
  // Bad page tables are errors, not memory corruption.
  const std::vector<int32_t> short_table = {3};
  std::vector<std::span<const int32_t>> bad = {short_table};
  EXPECT_FALSE(WriteKv(pool, k.data(), v.data(), c2, bad).ok());
  const std::vector<int32_t> oob = {3, 9};
  std::vector<std::span<const int32_t>> bad2 = {oob};
  EXPECT_FALSE(WriteKv(pool, k.data(), v.data(), c2, bad2).ok());
}

TEST(CpuOps, EmbeddingSamplingAndGates) {
  const std::vector<float> table = {0, 1, 2, 3, 4, 5};  // vocab 3, dim 2
  std::vector<float> out(4);
  const std::vector<int32_t> ids = {2, 0};
  ASSERT_TRUE(EmbeddingGather(table.data(), 3, 2, ids, out.data()).ok());
  EXPECT_EQ(out, (std::vector<float>{4, 5, 0, 1}));
  const std::vector<int32_t> bad = {3};
  EXPECT_EQ(EmbeddingGather(table.data(), 3, 2, bad, out.data()).code(),
            absl::StatusCode::kInvalidArgument);

  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
  std::vector<float> lp(4);
  LogSoftmax(logits.data(), 4, lp.data());
  double total = 0;
  for (float x : lp) total += std::exp(double(x));
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(lp[1] - lp[0], 1.5, 1e-6);

  const std::vector<float> a = {0.3f, 25.0f}, b = {-0.2f, 1.0f}, alog = {0.1f}, dt = {0.5f};
  std::vector<float> g(2), beta(2);
  GdnGates(a.data(), b.data(), alog.data(), dt.data(), 2, 1, g.data(), beta.data());
  EXPECT_NEAR(g[0], -std::exp(0.1) * std::log1p(std::exp(0.8)), 1e-6);
  EXPECT_NEAR(g[1], -std::exp(0.1) * 25.5, 1e-4);
  EXPECT_NEAR(beta[0], 1.0 / (1.0 + std::exp(0.2)), 1e-6);

  const std::vector<float> gate = {1.0f, -2.0f}, up = {3.0f, 0.5f};
  std::vector<float> sw(2);
  SwiGlu(gate.data(), up.data(), 2, sw.data());
  EXPECT_NEAR(sw[0], SiluD(1.0) * 3.0, 1e-6);
  EXPECT_NEAR(sw[1], SiluD(-2.0) * 0.5, 1e-6);
  std::vector<float> xs = {2.0f, 2.0f};
  MulSigmoid(xs.data(), gate.data(), 2);
  EXPECT_NEAR(xs[1], 2.0 / (1.0 + std::exp(2.0)), 1e-6);
}

}  // namespace
}  // namespace sparkserve::kernels::cpu
