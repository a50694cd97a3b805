// Shared pieces of the attention GPU tests (attention_test.cc, prefill_attention_test.cc): one ragged
// step (layout, shuffled page tables, inputs, a KV pool of bf16 or fp8 with its history) on host and
// device, the runs of QkNormRopeKvWrite / PagedAttention, and their checks against the CPU reference
// (q/k norm + RoPE + WriteKv; PagedAttention + MulSigmoid on the pool the GPU wrote, decoded).
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_kernels.h"
#include "quant/e4m3.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::attention {

namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

inline constexpr uint16_t kBf16Nan = 0x7fc0;
inline constexpr uint8_t kFp8Nan = 0x7f;
inline constexpr float kEps = 1e-6f;

struct Shape {
  int heads, kv_heads, head_dim, rot_dim, page_size;
  float theta;
};
inline constexpr Shape k4B{16, 4, 256, 64, 16, 1e7f};

struct SeqSpec {
  int start_pos, num_tokens;
};

// How the pool stores K/V. The fp8 scales: K's is arbitrary (the GPU must divide like IEEE), V's a
// power of two so that the injected tie values divide exactly.
struct PoolFormat {
  kc::KvDtype dtype = kc::KvDtype::kBf16;
  float k_scale = 1.0f, v_scale = 1.0f;
};
inline constexpr PoolFormat kBf16Pool{};
inline constexpr PoolFormat kFp8Pool{kc::KvDtype::kFp8E4M3, 0.0371f, 0.03125f};

inline std::string Name(const PoolFormat& f) { return f.dtype == kc::KvDtype::kFp8E4M3 ? "fp8" : "bf16"; }

// Unit-variance values from a splitmix64 stream (for inputs too large for std::normal_distribution
// to fill quickly).
inline std::vector<float> FastRandom(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed;
  for (float& x : v) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = (static_cast<float>(z >> 40) / 16777216.0f * 2.0f - 1.0f) * 1.7320508f;
  }
  return v;
}

// One ragged step: its layout, page tables, inputs, the KV pool before the step (raw element bytes),
// and the GPU's buffers. Page ids come from a shuffled permutation of the pool, so no table is
// contiguous.
struct AttentionCase {
  Shape sh;
  PoolFormat fmt;
  std::vector<SeqSpec> specs;
  float scale = 0;
  int T = 0, pages_stride = 0, num_pages = 0;
  std::vector<cpu::RaggedSeq> seqs;
  std::vector<std::vector<int32_t>> pages;
  std::vector<int32_t> token_begin, start_pos, token_seq, positions, page_table;
  std::vector<float> qg, k, v, q_norm, k_norm;  // qg [T, heads, 2 hd] = per head [q | gate]
  std::vector<uint8_t> pool_k, pool_v;           // before the step: NaN except the history

  DeviceBuffer<int32_t> d_token_begin, d_start_pos, d_token_seq, d_positions, d_page_table;
  DeviceBuffer<float> d_qg, d_k, d_v, d_q_norm, d_k_norm, d_q_out;
  DeviceBuffer<uint8_t> d_pool_k, d_pool_v, d_workspace;
  DeviceBuffer<uint16_t> d_out;
  kc::RaggedBatchDevice batch;
  kc::KvPoolDevice kv;

  int ElemBytes() const { return kc::KvDtypeBytes(fmt.dtype); }
  size_t PoolElems() const { return static_cast<size_t>(num_pages) * sh.page_size * sh.kv_heads * sh.head_dim; }
  size_t PoolOffset(int s, int pos) const {
    const int page = pages[s][pos / sh.page_size];
    return (static_cast<size_t>(page) * sh.page_size + pos % sh.page_size) * sh.kv_heads * sh.head_dim;
  }
  // Element `i` of a raw pool as a value (fp8: code * scale).
  float Decode(const std::vector<uint8_t>& raw, size_t i, float fp8_scale) const {
    if (fmt.dtype == kc::KvDtype::kFp8E4M3) return quant::E4M3ToF32(raw[i]) * fp8_scale;
    return core::Bf16ToF32(static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8)));
  }
  void Encode(std::vector<uint8_t>& raw, size_t i, float x, float fp8_scale) const {
    if (fmt.dtype == kc::KvDtype::kFp8E4M3) {
      raw[i] = quant::F32ToE4M3(x / fp8_scale);
    } else {
      const uint16_t b = core::F32ToBf16(x);
      raw[2 * i] = static_cast<uint8_t>(b & 0xff);
      raw[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
};

struct BuildOptions {
  PoolFormat fmt = kBf16Pool;
  bool fast_random = false;
  // fp8 only: overwrite a few v inputs with values that exercise the encoder (ties, subnormals,
  // saturation, infinities, signed zero).
  bool special_v = false;
  // Leave the history [0, start_pos) as NaN poison (timing cases fill the pools on the device).
  bool no_history = false;
};

// score_gain multiplies the usual head_dim^-0.5 scale: > 1 makes the softmax peaky, so a wrong
// or missing key moves the output well past the tolerance even over thousands of keys.
inline void Build(AttentionCase& c, const Shape& sh, std::vector<SeqSpec> specs, uint32_t seed, float score_gain,
                  const BuildOptions& opt = {}) {
  std::mt19937 rng(seed);
  c.sh = sh;
  c.fmt = opt.fmt;
  c.specs = std::move(specs);
  c.scale = score_gain / std::sqrt(static_cast<float>(sh.head_dim));
  const int S = static_cast<int>(c.specs.size());
  int total_pages = 0;
  c.token_begin.assign(1, 0);
  for (int s = 0; s < S; ++s) {
    const SeqSpec& sp = c.specs[s];
    const int need = (sp.start_pos + sp.num_tokens + sh.page_size - 1) / sh.page_size;
    c.pages_stride = std::max(c.pages_stride, need + 1);  // one spare entry a row, never read
    total_pages += need;
    c.seqs.push_back({c.T, sp.num_tokens, sp.start_pos});
    c.start_pos.push_back(sp.start_pos);
    for (int i = 0; i < sp.num_tokens; ++i) {
      c.token_seq.push_back(s);
      c.positions.push_back(sp.start_pos + i);
    }
    c.T += sp.num_tokens;
    c.token_begin.push_back(c.T);
  }
  c.num_pages = total_pages + 7;  // spare pages nobody uses stay NaN
  std::vector<int32_t> ids(c.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.page_table.assign(static_cast<size_t>(S) * c.pages_stride, -1);
  int next = 0;
  for (int s = 0; s < S; ++s) {
    const SeqSpec& sp = c.specs[s];
    const int need = (sp.start_pos + sp.num_tokens + sh.page_size - 1) / sh.page_size;
    c.pages.emplace_back(ids.begin() + next, ids.begin() + next + need);
    std::copy(c.pages[s].begin(), c.pages[s].end(), c.page_table.begin() + static_cast<size_t>(s) * c.pages_stride);
    next += need;
  }

  const size_t hd = sh.head_dim;
  auto rand = [&](size_t n, float scale) {
    if (!opt.fast_random) return RandomF32(n, rng, scale);
    std::vector<float> x = FastRandom(n, rng());
    for (float& e : x) e *= scale;
    return x;
  };
  c.qg = rand(c.T * sh.heads * 2 * hd, 1.0f);
  c.k = rand(c.T * sh.kv_heads * hd, 1.0f);
  c.v = rand(c.T * sh.kv_heads * hd, 1.0f);
  c.q_norm = RandomF32(hd, rng, 0.2f);
  c.k_norm = RandomF32(hd, rng, 0.2f);
  if (opt.special_v && opt.fmt.dtype == kc::KvDtype::kFp8E4M3) {
    const float s = opt.fmt.v_scale;
    const std::vector<float> specials = {
        1.0625f * s,  1.1875f * s, -1.0625f * s, 3.5f * 0.001953125f * s, 0.5f * 0.001953125f * s,
        1.5f * 0.001953125f * s, 0.0146484375f * s, 440.0f * s, 456.0f * s, 464.0f * s, -1e6f * s,
        INFINITY, -INFINITY, -0.0f, 1e-30f, 240.0f * s + 4.0f * s};
    for (size_t i = 0; i < specials.size() && i * 37 < c.v.size(); ++i) c.v[i * 37] = specials[i];
  }

  // History [0, start_pos) of every seq, as an earlier step would have left it.
  const int eb = c.ElemBytes();
  c.pool_k.assign(c.PoolElems() * eb, eb == 1 ? kFp8Nan : 0);
  c.pool_v.assign(c.PoolElems() * eb, eb == 1 ? kFp8Nan : 0);
  if (eb == 2) {
    for (size_t i = 0; i < c.PoolElems(); ++i) {
      c.pool_k[2 * i] = c.pool_v[2 * i] = kBf16Nan & 0xff;
      c.pool_k[2 * i + 1] = c.pool_v[2 * i + 1] = kBf16Nan >> 8;
    }
  }
  for (int s = 0; s < S && !opt.no_history; ++s) {
    const size_t row = sh.kv_heads * hd;
    const std::vector<float> hk = rand(c.specs[s].start_pos * row, 1.0f);
    const std::vector<float> hv = rand(c.specs[s].start_pos * row, 1.0f);
    for (int pos = 0; pos < c.specs[s].start_pos; ++pos) {
      const size_t off = c.PoolOffset(s, pos);
      for (size_t i = 0; i < row; ++i) {
        c.Encode(c.pool_k, off + i, hk[pos * row + i], c.fmt.k_scale);
        c.Encode(c.pool_v, off + i, hv[pos * row + i], c.fmt.v_scale);
      }
    }
  }

  c.d_token_begin = ToDevice(c.token_begin);
  c.d_start_pos = ToDevice(c.start_pos);
  c.d_token_seq = ToDevice(c.token_seq);
  c.d_positions = ToDevice(c.positions);
  c.d_page_table = ToDevice(c.page_table);
  c.d_qg = ToDevice(c.qg);
  c.d_k = ToDevice(c.k);
  c.d_v = ToDevice(c.v);
  c.d_q_norm = ToDevice(c.q_norm);
  c.d_k_norm = ToDevice(c.k_norm);
  c.d_q_out = PoisonedF32(c.T * sh.heads * hd);
  c.d_pool_k = ToDevice(c.pool_k);
  c.d_pool_v = ToDevice(c.pool_v);
  c.d_out = ToDevice(std::vector<uint16_t>(c.T * sh.heads * hd, 0x7e00));  // f16 NaN
  // NaN bytes: a split partial the kernel forgets to write poisons the output.
  c.d_workspace = ToDevice(std::vector<uint8_t>(kc::PagedAttentionWorkspaceBytes(c.T, sh.heads, sh.head_dim), 0xff));

  c.batch.num_seqs = S;
  c.batch.num_tokens = c.T;
  c.batch.max_seq_tokens = 1;
  for (const SeqSpec& sp : c.specs) c.batch.max_seq_tokens = std::max(c.batch.max_seq_tokens, sp.num_tokens);
  c.batch.token_begin = c.d_token_begin.data();
  c.batch.start_pos = c.d_start_pos.data();
  c.batch.token_seq = c.d_token_seq.data();
  c.batch.positions = c.d_positions.data();
  c.batch.page_table = c.d_page_table.data();
  c.batch.pages_stride = c.pages_stride;
  c.kv.k = c.d_pool_k.data();
  c.kv.v = c.d_pool_v.data();
  c.kv.num_pages = c.num_pages;
  c.kv.page_size = sh.page_size;
  c.kv.kv_heads = sh.kv_heads;
  c.kv.head_dim = sh.head_dim;
  c.kv.dtype = c.fmt.dtype;
  c.kv.k_scale = c.fmt.k_scale;
  c.kv.v_scale = c.fmt.v_scale;
}

inline absl::Status RunWrite(AttentionCase& c) {
  const int hd = c.sh.head_dim;
  kc::QkvInput in;
  in.q = c.d_qg.data();
  in.q_row_stride = c.sh.heads * 2 * hd;
  in.q_head_stride = 2 * hd;
  in.k = c.d_k.data();
  in.k_row_stride = c.sh.kv_heads * hd;
  in.v = c.d_v.data();
  in.v_row_stride = c.sh.kv_heads * hd;
  return kc::QkNormRopeKvWrite(in, c.d_q_norm.data(), c.d_k_norm.data(), kEps, c.sh.heads, c.sh.rot_dim, c.sh.theta,
                               c.batch, c.kv, c.d_q_out.data(), nullptr);
}

// PagedAttention on the case's buffers, the output poisoned with NaN first.
inline absl::Status RunAttention(AttentionCase& c, kc::AttentionPath path = kc::AttentionPath::kAuto,
                                 cudaStream_t stream = nullptr, bool poison = true) {
  const int hd = c.sh.head_dim;
  if (poison) {
    const cudaError_t e = cudaMemset(c.d_out.data(), 0xff, c.d_out.size() * sizeof(uint16_t));
    if (e != cudaSuccess) return absl::InternalError(cudaGetErrorString(e));
  }
  return kc::PagedAttention(c.d_q_out.data(), c.sh.heads, c.scale, c.kv, c.batch, c.d_qg.data() + hd,
                            c.sh.heads * 2 * hd, 2 * hd, reinterpret_cast<__half*>(c.d_out.data()),
                            c.d_workspace.data(), stream, path);
}

// True when x / scale lies so close to a rounding boundary of `code` that a last-bit difference
// in x may pick the neighbouring code (the GPU's k differs from the CPU's by float rounding).
inline bool NearFp8Boundary(float x, float scale) {
  const float y = x / scale;
  const float up = quant::E4M3ToF32(quant::F32ToE4M3(y * (1 + 1e-5f)));
  const float down = quant::E4M3ToF32(quant::F32ToE4M3(y * (1 - 1e-5f)));
  return up != down;
}

// q_out and the pool after QkNormRopeKvWrite against RmsNormZeroCentered + ApplyPartialRope +
// WriteKv on the CPU. Every pool element is checked: the written slots against the CPU's encoding
// (bf16: within one rounding; fp8: V byte for byte, K byte for byte unless the CPU's k sits on a
// rounding boundary, then one of the two codes), everything else (history, NaN free slots) unchanged.
inline void CheckWrite(AttentionCase& c, const std::string& what) {
  const int T = c.T, H = c.sh.heads, KV = c.sh.kv_heads, hd = c.sh.head_dim;
  std::vector<float> q(static_cast<size_t>(T) * H * hd), kk = c.k;
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const float* src = c.qg.data() + (static_cast<size_t>(t) * H + h) * 2 * hd;
      std::copy(src, src + hd, q.data() + (static_cast<size_t>(t) * H + h) * hd);
    }
  }
  cpu::RmsNormZeroCentered(q.data(), c.q_norm.data(), static_cast<int64_t>(T) * H, hd, kEps, q.data());
  cpu::RmsNormZeroCentered(kk.data(), c.k_norm.data(), static_cast<int64_t>(T) * KV, hd, kEps, kk.data());
  cpu::ApplyPartialRope(q.data(), T, H, hd, c.sh.rot_dim, c.positions, c.sh.theta);
  cpu::ApplyPartialRope(kk.data(), T, KV, hd, c.sh.rot_dim, c.positions, c.sh.theta);
  EXPECT_CLOSE(ToHost(c.d_q_out), q, 1e-4, what + ": q_out");

  // The written values at their slots (NaN elsewhere: the inputs hold no NaN).
  std::vector<float> want_k(c.PoolElems(), NAN), want_v(c.PoolElems(), NAN);
  cpu::KvPool pool{want_k.data(), want_v.data(), c.num_pages, c.sh.page_size, KV, hd};
  std::vector<std::span<const int32_t>> spans(c.pages.begin(), c.pages.end());
  ASSERT_TRUE(cpu::WriteKv(pool, kk.data(), c.v.data(), c.seqs, spans).ok());
  const std::vector<uint8_t> got_k = ToHost(c.d_pool_k), got_v = ToHost(c.d_pool_v);
  const bool fp8 = c.fmt.dtype == kc::KvDtype::kFp8E4M3;
  int bad = 0;
  for (size_t i = 0; i < want_k.size() && bad < 5; ++i) {
    for (int which = 0; which < 2 && bad < 5; ++which) {
      const bool is_k = which == 0;
      const float want = is_k ? want_k[i] : want_v[i];
      const std::vector<uint8_t>& got = is_k ? got_k : got_v;
      const std::vector<uint8_t>& before = is_k ? c.pool_k : c.pool_v;
      const float sc = is_k ? c.fmt.k_scale : c.fmt.v_scale;
      std::string problem;
      if (std::isnan(want)) {  // untouched
        const int eb = c.ElemBytes();
        if (!std::equal(got.begin() + i * eb, got.begin() + (i + 1) * eb, before.begin() + i * eb)) {
          problem = "changed an element outside the step's slots";
        }
      } else if (fp8) {
        const uint8_t want_code = quant::F32ToE4M3(want / sc);
        const bool ok = got[i] == want_code || (is_k && NearFp8Boundary(want, sc) &&
                                                (got[i] == quant::F32ToE4M3(want / sc * (1 + 1e-5f)) ||
                                                 got[i] == quant::F32ToE4M3(want / sc * (1 - 1e-5f))));
        if (!ok) {
          problem = "fp8 code " + std::to_string(got[i]) + ", CPU encodes " + std::to_string(want / sc) + " as " +
                    std::to_string(want_code);
        }
      } else {
        const float g = c.Decode(got, i, 1.0f);
        if (!(std::abs(g - want) <= std::ldexp(std::abs(want), -8) + 1e-6f)) {
          problem = "bf16 value " + std::to_string(g) + ", want " + std::to_string(want);
        }
      }
      if (!problem.empty()) {
        ADD_FAILURE() << what << ": pool " << (is_k ? "K" : "V") << " element " << i << " (page "
                      << i / (static_cast<size_t>(c.sh.page_size) * KV * hd) << "): " << problem;
        ++bad;
      }
    }
  }
}

// cpu::PagedAttention + MulSigmoid on the GPU's q_out and the GPU-written pool (decoded: fp8 codes
// times their scale) for the tokens in `tokens`, each [heads * head_dim].
inline std::vector<std::vector<float>> ReferenceOutputs(AttentionCase& c, const std::vector<int>& tokens) {
  const int H = c.sh.heads, KV = c.sh.kv_heads, hd = c.sh.head_dim;
  const std::vector<float> q = ToHost(c.d_q_out);
  const std::vector<uint8_t> pk = ToHost(c.d_pool_k), pv = ToHost(c.d_pool_v);
  std::vector<float> fk(c.PoolElems()), fv(c.PoolElems());
  for (size_t i = 0; i < fk.size(); ++i) {
    fk[i] = c.Decode(pk, i, c.fmt.k_scale);
    fv[i] = c.Decode(pv, i, c.fmt.v_scale);
  }
  cpu::KvPool pool{fk.data(), fv.data(), c.num_pages, c.sh.page_size, KV, hd};
  const size_t row = static_cast<size_t>(H) * hd;
  std::vector<std::vector<float>> want(tokens.size(), std::vector<float>(row));
  // One CPU call per seq over the checked tokens of that seq would need them contiguous; one call
  // per token keeps it simple (cpu::PagedAttention parallelises over heads).
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int t = tokens[i], s = c.token_seq[t];
    const cpu::RaggedSeq one{0, 1, c.positions[t]};
    const std::span<const int32_t> table(c.pages[s]);
    cpu::PagedAttention(pool, q.data() + t * row, H, c.scale, std::span<const cpu::RaggedSeq>(&one, 1),
                        std::span<const std::span<const int32_t>>(&table, 1), want[i].data());
    std::vector<float> gate(row);
    for (int h = 0; h < H; ++h) {
      const float* src = c.qg.data() + (t * static_cast<size_t>(H) + h) * 2 * hd + hd;
      std::copy(src, src + hd, gate.data() + h * hd);
    }
    cpu::MulSigmoid(want[i].data(), gate.data(), static_cast<int64_t>(row));
  }
  return want;
}

inline std::vector<int> AllTokens(const AttentionCase& c) {
  std::vector<int> t(c.T);
  std::iota(t.begin(), t.end(), 0);
  return t;
}

// The GPU output of each token in `tokens` against `want` (ReferenceOutputs of the same tokens):
// per token max |got - want| / max(max |want|, 1e-3) <= tol; the worst token is reported with its
// seq and position. NaN/inf never pass.
inline void CompareOutputs(AttentionCase& c, const std::vector<int>& tokens,
                           const std::vector<std::vector<float>>& want, double tol, const std::string& what) {
  const size_t row = static_cast<size_t>(c.sh.heads) * c.sh.head_dim;
  const std::vector<uint16_t> out = ToHost(c.d_out);
  double worst = 0;
  int worst_token = -1;
  size_t worst_elem = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int t = tokens[i];
    double err = 0, ref = 1e-3;
    size_t at = 0;
    for (size_t e = 0; e < row; ++e) {
      const double g = core::F16ToF32(out[t * row + e]), w = want[i][e];
      const double d = std::isfinite(g) ? std::abs(g - w) : INFINITY;
      if (d > err || std::isnan(d)) {
        err = std::isnan(d) ? INFINITY : d;
        at = e;
      }
      ref = std::max(ref, std::abs(w));
    }
    if (err / ref > worst || (worst_token < 0 && err / ref >= worst)) {
      worst = err / ref;
      worst_token = t;
      worst_elem = at;
    }
  }
  ASSERT_GE(worst_token, 0) << what << ": no tokens checked";
  const int t = worst_token, h = static_cast<int>(worst_elem / c.sh.head_dim);
  const size_t i = std::find(tokens.begin(), tokens.end(), t) - tokens.begin();
  EXPECT_LE(worst, tol) << what << ": attention output of token " << t << " (seq " << c.token_seq[t] << ", position "
                        << c.positions[t] << "), head " << h << " dim " << worst_elem % c.sh.head_dim << ": got "
                        << core::F16ToF32(out[t * row + worst_elem]) << ", want " << want[i][worst_elem]
                        << "; relative error " << worst << " (tolerance " << tol << ")";
}

// Tolerances: the split-K kernel computes in f32 (only the f16 output rounds); the prefill kernel
// rounds q and the probabilities to f16 for the tensor cores.
inline constexpr double kSplitKTol = 3e-3;
inline constexpr double kPrefillTol = 6e-3;

inline void CheckAttention(AttentionCase& c, const std::string& what, double tol, std::vector<int> tokens = {}) {
  if (tokens.empty()) tokens = AllTokens(c);
  CompareOutputs(c, tokens, ReferenceOutputs(c, tokens), tol, what);
}

// Mean milliseconds of `fn` over `reps` launches after one warm-up.
template <typename Fn>
float TimeMs(Fn fn, int reps) {
  fn();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

}  // namespace sparkserve::gpu_test::attention
