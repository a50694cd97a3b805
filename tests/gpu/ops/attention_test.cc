// QkNormRopeKvWrite and PagedAttention (kernels/cuda/attention.h) against the CPU reference ops:
// q/k norm + partial RoPE + WriteKv, then paged attention + MulSigmoid, over ragged steps (decode,
// MTP-style verify, prefill chunks from position 0 and with history) with shuffled page ids.
// The KV pool is bf16: the q/k checks allow one bf16 rounding, and the CPU attention runs on the
// very bf16 pool (widened) and q the GPU wrote, so only the kernel's own arithmetic is compared.
#include "kernels/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention_kernels.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

constexpr uint16_t kBf16Nan = 0x7fc0;
constexpr uint16_t kF16Nan = 0x7e00;
constexpr float kEps = 1e-6f;

struct Shape {
  int heads, kv_heads, head_dim, rot_dim, page_size;
  float theta;
};
constexpr Shape k4B{16, 4, 256, 64, 16, 1e7f};

struct SeqSpec {
  int start_pos, num_tokens;
};

// Unit-variance values from a splitmix64 stream (for inputs too large for std::normal_distribution
// to fill quickly).
std::vector<float> FastRandom(size_t n, uint64_t seed) {
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

// One ragged step: its layout, page tables, inputs, the KV pool before the step, and the GPU's
// buffers. Page ids come from a shuffled permutation of the pool, so no table is contiguous.
struct AttentionCase {
  Shape sh;
  std::vector<SeqSpec> specs;
  float scale = 0;
  int T = 0, pages_stride = 0, num_pages = 0;
  std::vector<cpu::RaggedSeq> seqs;
  std::vector<std::vector<int32_t>> pages;
  std::vector<int32_t> token_begin, start_pos, token_seq, positions, page_table;
  std::vector<float> qg, k, v, q_norm, k_norm;  // qg [T, heads, 2 hd] = per head [q | gate]
  std::vector<uint16_t> pool_k, pool_v;          // bf16 before the step: NaN except the history

  DeviceBuffer<int32_t> d_token_begin, d_start_pos, d_token_seq, d_positions, d_page_table;
  DeviceBuffer<float> d_qg, d_k, d_v, d_q_norm, d_k_norm, d_q_out;
  DeviceBuffer<uint16_t> d_pool_k, d_pool_v, d_out;
  DeviceBuffer<uint8_t> d_workspace;
  kc::RaggedBatchDevice batch;
  kc::KvPoolDevice kv;

  size_t PoolElems() const { return static_cast<size_t>(num_pages) * sh.page_size * sh.kv_heads * sh.head_dim; }
  size_t PoolOffset(int s, int pos) const {
    const int page = pages[s][pos / sh.page_size];
    return (static_cast<size_t>(page) * sh.page_size + pos % sh.page_size) * sh.kv_heads * sh.head_dim;
  }
};

// score_gain multiplies the usual head_dim^-0.5 scale: > 1 makes the softmax peaky, so a wrong
// or missing key moves the output well past the tolerance even over thousands of keys.
void Build(AttentionCase& c, const Shape& sh, std::vector<SeqSpec> specs, uint32_t seed, float score_gain,
           bool fast_random = false) {
  std::mt19937 rng(seed);
  c.sh = sh;
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
    if (!fast_random) return RandomF32(n, rng, scale);
    std::vector<float> x = FastRandom(n, rng());
    for (float& e : x) e *= scale;
    return x;
  };
  c.qg = rand(c.T * sh.heads * 2 * hd, 1.0f);
  c.k = rand(c.T * sh.kv_heads * hd, 1.0f);
  c.v = rand(c.T * sh.kv_heads * hd, 1.0f);
  c.q_norm = RandomF32(hd, rng, 0.2f);
  c.k_norm = RandomF32(hd, rng, 0.2f);

  // History [0, start_pos) of every seq, as an earlier step would have left it (bf16, normed k).
  c.pool_k.assign(c.PoolElems(), kBf16Nan);
  c.pool_v.assign(c.PoolElems(), kBf16Nan);
  for (int s = 0; s < S; ++s) {
    const size_t row = sh.kv_heads * hd;
    const std::vector<float> hk = rand(c.specs[s].start_pos * row, 1.0f);
    const std::vector<float> hv = rand(c.specs[s].start_pos * row, 1.0f);
    for (int pos = 0; pos < c.specs[s].start_pos; ++pos) {
      const size_t off = c.PoolOffset(s, pos);
      for (size_t i = 0; i < row; ++i) {
        c.pool_k[off + i] = core::F32ToBf16(hk[pos * row + i]);
        c.pool_v[off + i] = core::F32ToBf16(hv[pos * row + i]);
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
  c.d_out = ToDevice(std::vector<uint16_t>(c.T * sh.heads * hd, kF16Nan));
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
  c.kv.k = reinterpret_cast<__nv_bfloat16*>(c.d_pool_k.data());
  c.kv.v = reinterpret_cast<__nv_bfloat16*>(c.d_pool_v.data());
  c.kv.num_pages = c.num_pages;
  c.kv.page_size = sh.page_size;
  c.kv.kv_heads = sh.kv_heads;
  c.kv.head_dim = sh.head_dim;
}

absl::Status RunWrite(AttentionCase& c) {
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

absl::Status RunAttention(AttentionCase& c) {
  const int hd = c.sh.head_dim;
  return kc::PagedAttention(c.d_q_out.data(), c.sh.heads, c.scale, c.kv, c.batch, c.d_qg.data() + hd,
                            c.sh.heads * 2 * hd, 2 * hd, reinterpret_cast<__half*>(c.d_out.data()),
                            c.d_workspace.data(), nullptr);
}

// q_out and the pool after QkNormRopeKvWrite against RmsNormZeroCentered + ApplyPartialRope +
// WriteKv on the CPU. Every pool element is checked: the written slots within one bf16 rounding,
// everything else (history, NaN-poisoned free slots) unchanged.
void CheckWrite(AttentionCase& c, const std::string& what) {
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

  std::vector<float> want_k(c.PoolElems()), want_v(c.PoolElems());
  for (size_t i = 0; i < want_k.size(); ++i) {
    want_k[i] = core::Bf16ToF32(c.pool_k[i]);
    want_v[i] = core::Bf16ToF32(c.pool_v[i]);
  }
  cpu::KvPool pool{want_k.data(), want_v.data(), c.num_pages, c.sh.page_size, KV, hd};
  std::vector<std::span<const int32_t>> spans(c.pages.begin(), c.pages.end());
  ASSERT_TRUE(cpu::WriteKv(pool, kk.data(), c.v.data(), c.seqs, spans).ok());
  const std::vector<uint16_t> got_k = ToHost(c.d_pool_k), got_v = ToHost(c.d_pool_v);
  int bad = 0;
  for (size_t i = 0; i < want_k.size() && bad < 5; ++i) {
    for (int which = 0; which < 2; ++which) {
      const float want = which == 0 ? want_k[i] : want_v[i];
      const float got = core::Bf16ToF32(which == 0 ? got_k[i] : got_v[i]);
      const bool ok = std::isnan(want) ? std::isnan(got)
                                       : std::abs(got - want) <= std::ldexp(std::abs(want), -8) + 1e-6f;
      if (!ok) {
        ADD_FAILURE() << what << ": pool " << (which == 0 ? "K" : "V") << " element " << i << " is " << got
                      << ", want " << want;
        ++bad;
      }
    }
  }
}

// The GPU output against cpu::PagedAttention + MulSigmoid on the GPU's own q_out and bf16 pool,
// for the tokens in `check_tokens` (all when empty).
void CheckAttention(AttentionCase& c, const std::string& what, double tol, std::vector<int> check_tokens = {}) {
  const int H = c.sh.heads, KV = c.sh.kv_heads, hd = c.sh.head_dim;
  const std::vector<float> q = ToHost(c.d_q_out);
  const std::vector<uint16_t> pk = ToHost(c.d_pool_k), pv = ToHost(c.d_pool_v), out = ToHost(c.d_out);
  std::vector<float> fk(pk.size()), fv(pv.size());
  for (size_t i = 0; i < pk.size(); ++i) {
    fk[i] = core::Bf16ToF32(pk[i]);
    fv[i] = core::Bf16ToF32(pv[i]);
  }
  cpu::KvPool pool{fk.data(), fv.data(), c.num_pages, c.sh.page_size, KV, hd};
  if (check_tokens.empty()) {
    check_tokens.resize(c.T);
    std::iota(check_tokens.begin(), check_tokens.end(), 0);
  }
  const size_t row = static_cast<size_t>(H) * hd;
  std::vector<float> got, want;
  for (int t : check_tokens) {
    const int s = c.token_seq[t];
    const cpu::RaggedSeq one{0, 1, c.positions[t]};
    const std::span<const int32_t> table(c.pages[s]);
    std::vector<float> o(row);
    cpu::PagedAttention(pool, q.data() + t * row, H, c.scale, std::span<const cpu::RaggedSeq>(&one, 1),
                        std::span<const std::span<const int32_t>>(&table, 1), o.data());
    std::vector<float> gate(row);
    for (int h = 0; h < H; ++h) {
      const float* src = c.qg.data() + (t * static_cast<size_t>(H) + h) * 2 * hd + hd;
      std::copy(src, src + hd, gate.data() + h * hd);
    }
    cpu::MulSigmoid(o.data(), gate.data(), static_cast<int64_t>(row));
    want.insert(want.end(), o.begin(), o.end());
    for (size_t i = 0; i < row; ++i) got.push_back(core::F16ToF32(out[t * row + i]));
  }
  EXPECT_CLOSE(got, want, tol, what + ": attention output");
}

void RunAndCheck(const Shape& sh, std::vector<SeqSpec> specs, uint32_t seed, float score_gain, const std::string& what) {
  AttentionCase c;
  Build(c, sh, std::move(specs), seed, score_gain);
  GPU_ASSERT_OK(RunWrite(c));
  CheckWrite(c, what);
  GPU_ASSERT_OK(RunAttention(c));
  CheckAttention(c, what, 3e-3);
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

TEST(AttentionTest, Decode4BContexts1To5000) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  ASSERT_GT(kc::AttentionSplits(4), 1) << "a 4-token step should take the split-K path";
  AttentionCase c;
  Build(c, k4B, {{0, 1}, {16, 1}, {999, 1}, {4999, 1}}, 11, 1.0f);
  GPU_ASSERT_OK(RunWrite(c));
  CheckWrite(c, "decode 4B");
  GPU_ASSERT_OK(RunAttention(c));
  CheckAttention(c, "decode 4B", 3e-3);
  // Peaky scores over the same step: one wrong key would show.
  c.scale *= 4.0f;
  GPU_ASSERT_OK(RunAttention(c));
  CheckAttention(c, "decode 4B, peaky softmax", 3e-3);

  AttentionCase one;
  Build(one, k4B, {{4999, 1}}, 12, 1.0f);
  GPU_ASSERT_OK(RunWrite(one));
  const float write_ms = TimeMs([&] { (void)RunWrite(one); }, 20);
  const float attn_ms = TimeMs([&] { (void)RunAttention(one); }, 20);
  std::printf("[ timing ] 4B batch 1, context 5000: QkNormRopeKvWrite %.1f us, PagedAttention %.1f us\n",
              write_ms * 1e3f, attn_ms * 1e3f);
  CheckAttention(one, "decode 4B batch 1", 3e-3);
}

TEST(AttentionTest, RaggedPrefillDecodeVerifyMix4B) {
  ASSERT_TRUE(HasCudaDevice());
  // Prefill from 0 (tiles of 8 plus a tail of 5), prefill with 50 positions of history, decode,
  // a 3-token verify, one exact tile, a first token. 70 tokens: split-K on any GPU with >70 SMs.
  RunAndCheck(k4B, {{0, 37}, {50, 20}, {299, 1}, {100, 3}, {7, 8}, {0, 1}}, 21, 3.0f, "ragged 4B");
}

TEST(AttentionTest, LongPrefillChunkWithoutSplits4B) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_EQ(kc::AttentionSplits(301), 1) << "a 301-token step should skip the split-K path";
  RunAndCheck(k4B, {{200, 300}, {1000, 1}}, 31, 3.0f, "long prefill 4B");
}

TEST(AttentionTest, ManyDecodeSeqsWithoutSplits4B) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(41);
  std::vector<SeqSpec> specs;
  for (int s = 0; s < 160; ++s) specs.push_back({static_cast<int>(rng() % 300), s % 7 == 0 ? 2 : 1});
  int tokens = 0;
  for (const SeqSpec& sp : specs) tokens += sp.num_tokens;
  ASSERT_EQ(kc::AttentionSplits(tokens), 1) << tokens << " tokens should skip the split-K path";
  RunAndCheck(k4B, specs, 42, 3.0f, "many decode seqs 4B");
}

TEST(AttentionTest, SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice());
  const std::vector<Shape> shapes = {
      {4, 1, 16, 4, 4, 1e4f},     // GQA 4, head_dim 16, 2 lanes a key
      {3, 1, 24, 6, 5, 1e4f},     // GQA 3, head_dim 24 (a padded lane), page_size 5
      {4, 2, 32, 32, 3, 1e4f},    // GQA 2, full rotary, page_size 3
      {2, 2, 24, 0, 4, 1e4f},     // GQA 1, no rotary
      {12, 2, 32, 8, 4, 1e6f},    // GQA 6: two head groups a kv head
      {8, 2, 64, 16, 8, 1e6f},    // GQA 4, head_dim 64
      {4, 1, 128, 32, 16, 1e7f},  // GQA 4, head_dim 128
  };
  const std::vector<SeqSpec> specs = {{0, 13}, {5, 1}, {30, 4}, {3, 9}, {0, 1}, {17, 2}, {21, 40}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const std::string what = "shape " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " x " +
                             std::to_string(s.head_dim) + " rot " + std::to_string(s.rot_dim) + " page " +
                             std::to_string(s.page_size);
    RunAndCheck(s, specs, 50 + static_cast<uint32_t>(i), 3.0f, what);
    // The same shape as a pure decode step (split-K path).
    RunAndCheck(s, {{0, 1}, {70, 1}, {333, 1}}, 60 + static_cast<uint32_t>(i), 3.0f, what + " decode");
  }
}

TEST(AttentionTest, Prefill8192Chunk4B) {
  ASSERT_TRUE(HasCudaDevice());
  AttentionCase c;
  Build(c, k4B, {{0, 8192}}, 71, 1.0f, /*fast_random=*/true);
  GPU_ASSERT_OK(RunWrite(c));
  GPU_ASSERT_OK(RunAttention(c));
  CheckAttention(c, "prefill 8192", 3e-3, {0, 1, 7, 8, 9, 1000, 4095, 4096, 8183, 8184, 8191});
  const float ms = TimeMs([&] { (void)RunAttention(c); }, 2);
  std::printf("[ timing ] 4B prefill chunk of 8192 tokens: PagedAttention %.2f ms\n", ms);
}

TEST(AttentionTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  AttentionCase c;
  Build(c, {4, 2, 32, 8, 4, 1e4f}, {{3, 2}}, 81, 1.0f);
  // The valid call works.
  GPU_ASSERT_OK(RunWrite(c));
  GPU_ASSERT_OK(RunAttention(c));
  const float* gate = c.d_qg.data() + 32;
  __half* out = reinterpret_cast<__half*>(c.d_out.data());
  auto attn = [&](const kc::KvPoolDevice& kv, int heads, void* ws) {
    return kc::PagedAttention(c.d_q_out.data(), heads, 1.0f, kv, c.batch, gate, heads * 64, 64, out, ws, nullptr);
  };
  kc::KvPoolDevice kv = c.kv;
  EXPECT_EQ(attn(kv, 3, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);  // 3 % 2 heads
  EXPECT_EQ(attn(kv, 4, nullptr).code(), absl::StatusCode::kInvalidArgument);               // no workspace
  kv.head_dim = 20;
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);  // head_dim % 8
  kv.head_dim = 264;
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);  // head_dim > 256
  kv = c.kv;
  kv.page_size = 0;
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);

  kc::QkvInput in{c.d_qg.data(), 4 * 64, 64, c.d_k.data(), 2 * 32, c.d_v.data(), 2 * 32};
  auto write = [&](const kc::QkvInput& x, int rot) {
    return kc::QkNormRopeKvWrite(x, c.d_q_norm.data(), c.d_k_norm.data(), kEps, 4, rot, 1e4f, c.batch, c.kv,
                                 c.d_q_out.data(), nullptr);
  };
  EXPECT_EQ(write(in, 7).code(), absl::StatusCode::kInvalidArgument);   // odd rot_dim
  EXPECT_EQ(write(in, 34).code(), absl::StatusCode::kInvalidArgument);  // rot_dim > head_dim
  kc::QkvInput narrow = in;
  narrow.k_row_stride = 32;  // shorter than 2 kv heads
  EXPECT_EQ(write(narrow, 8).code(), absl::StatusCode::kInvalidArgument);
  kc::QkvInput no_v = in;
  no_v.v = nullptr;
  EXPECT_EQ(write(no_v, 8).code(), absl::StatusCode::kInvalidArgument);
  // An empty step is a no-op.
  kc::RaggedBatchDevice empty = c.batch;
  empty.num_tokens = 0;
  EXPECT_TRUE(kc::PagedAttention(c.d_q_out.data(), 4, 1.0f, c.kv, empty, gate, 4 * 64, 64, out, nullptr, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace sparkserve::gpu_test
