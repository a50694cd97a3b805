// QkNormRopeKvWrite and PagedAttention (kernels/cuda/attention.h) against the CPU reference ops:
// q/k norm + partial RoPE + WriteKv, then paged attention + MulSigmoid, over ragged steps (decode,
// MTP-style verify, prefill chunks from position 0 and with history) with shuffled page ids, for
// bf16 and fp8 pools. The CPU attention runs on the very pool (decoded) and q the GPU wrote, so only
// the kernels' own arithmetic is compared. The tensor-core prefill kernel's own cases are in
// prefill_attention_test.cc.
#include "kernels/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention_kernels.h"
#include "tests/gpu/ops/attention_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

using namespace attention;  // NOLINT: the shared attention test vocabulary

// The tolerance of a step run on `path`: the prefill kernel's when it takes part.
double TolFor(const AttentionCase& c, kc::AttentionPath path) {
  const bool prefill = path != kc::AttentionPath::kSplitK && c.batch.max_seq_tokens > kc::kPerTokenMaxTokens &&
                       kc::PrefillAttentionSupports(c.sh.head_dim, c.sh.heads / c.sh.kv_heads);
  return prefill ? kPrefillTol : kSplitKTol;
}

void RunAndCheck(const Shape& sh, std::vector<SeqSpec> specs, uint32_t seed, float score_gain, const std::string& what,
                 const PoolFormat& fmt = kBf16Pool, kc::AttentionPath path = kc::AttentionPath::kAuto) {
  AttentionCase c;
  BuildOptions opt;
  opt.fmt = fmt;
  Build(c, sh, std::move(specs), seed, score_gain, opt);
  GPU_ASSERT_OK(RunWrite(c));
  CheckWrite(c, what);
  GPU_ASSERT_OK(RunAttention(c, path));
  CheckAttention(c, what, TolFor(c, path));
}

const PoolFormat kFormats[] = {kBf16Pool, kFp8Pool};

TEST(AttentionTest, Decode4BContexts1To5000) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  ASSERT_GT(kc::AttentionSplits(4), 1) << "a 4-token step should take the split-K path";
  for (const PoolFormat& fmt : kFormats) {
    const std::string what = "decode 4B " + Name(fmt);
    AttentionCase c;
    BuildOptions opt;
    opt.fmt = fmt;
    Build(c, k4B, {{0, 1}, {16, 1}, {999, 1}, {4999, 1}}, 11, 1.0f, opt);
    GPU_ASSERT_OK(RunWrite(c));
    CheckWrite(c, what);
    GPU_ASSERT_OK(RunAttention(c));
    CheckAttention(c, what, kSplitKTol);
    // Peaky scores over the same step: one wrong key would show.
    c.scale *= 4.0f;
    GPU_ASSERT_OK(RunAttention(c));
    CheckAttention(c, what + ", peaky softmax", kSplitKTol);

    AttentionCase one;
    Build(one, k4B, {{4999, 1}}, 12, 1.0f, opt);
    GPU_ASSERT_OK(RunWrite(one));
    GPU_ASSERT_OK(RunAttention(one));
    CheckAttention(one, what + " batch 1", kSplitKTol);
    const float write_ms = TimeMs([&] { (void)RunWrite(one); }, 20);
    const float attn_ms = TimeMs([&] { (void)RunAttention(one, kc::AttentionPath::kAuto, nullptr, false); }, 20);
    std::printf("[ timing ] 4B batch 1, context 5000, %s KV (L2-warm): QkNormRopeKvWrite %.1f us, PagedAttention %.1f us\n",
                Name(fmt).c_str(), write_ms * 1e3f, attn_ms * 1e3f);
  }
}

TEST(AttentionTest, RaggedPrefillDecodeVerifyMix4B) {
  ASSERT_TRUE(HasCudaDevice());
  // Prefill from 0 (tiles of 8 plus a tail of 5), prefill with 50 positions of history, decode,
  // a 3-token verify, one exact tile, a first token. 70 tokens: split-K on any GPU with >70 SMs.
  for (const PoolFormat& fmt : kFormats) {
    for (const auto path : {kc::AttentionPath::kSplitK, kc::AttentionPath::kAuto, kc::AttentionPath::kDecode}) {
      RunAndCheck(k4B, {{0, 37}, {50, 20}, {299, 1}, {100, 3}, {7, 8}, {0, 1}}, 21, 3.0f,
                  "ragged 4B " + Name(fmt) +
                      (path == kc::AttentionPath::kSplitK  ? " split-K"
                       : path == kc::AttentionPath::kAuto ? " auto"
                                                          : " decode kernel"),
                  fmt, path);
    }
  }
}

TEST(AttentionTest, LongPrefillChunkWithoutSplits4B) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_EQ(kc::AttentionSplits(301), 1) << "a 301-token step should skip the split-K path";
  RunAndCheck(k4B, {{200, 300}, {1000, 1}}, 31, 3.0f, "long prefill 4B split-K", kBf16Pool, kc::AttentionPath::kSplitK);
  RunAndCheck(k4B, {{200, 300}, {1000, 1}}, 31, 3.0f, "long prefill 4B fp8 split-K", kFp8Pool,
              kc::AttentionPath::kSplitK);
}

TEST(AttentionTest, ManyDecodeSeqsWithoutSplits4B) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(41);
  std::vector<SeqSpec> specs;
  for (int s = 0; s < 160; ++s) specs.push_back({static_cast<int>(rng() % 300), s % 7 == 0 ? 2 : 1});
  int tokens = 0;
  for (const SeqSpec& sp : specs) tokens += sp.num_tokens;
  ASSERT_EQ(kc::AttentionSplits(tokens), 1) << tokens << " tokens should skip the split-K path";
  for (const PoolFormat& fmt : kFormats) {
    RunAndCheck(k4B, specs, 42, 3.0f, "many decode seqs 4B " + Name(fmt), fmt);
    RunAndCheck(k4B, specs, 42, 3.0f, "many decode seqs 4B split-K " + Name(fmt), fmt, kc::AttentionPath::kSplitK);
  }
}

TEST(AttentionTest, SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice());
  const std::vector<Shape> shapes = {
      {4, 1, 16, 4, 4, 1e4f},     // GQA 4, head_dim 16, 2 lanes a key
      {3, 1, 24, 6, 5, 1e4f},     // GQA 3, head_dim 24 (a padded lane), page_size 5
      {4, 2, 32, 32, 3, 1e4f},    // GQA 2, full rotary, page_size 3
      {2, 2, 24, 0, 4, 1e4f},     // GQA 1, no rotary
      {12, 2, 32, 8, 4, 1e6f},    // GQA 6: two head groups a kv head
      {8, 2, 64, 16, 8, 1e6f},    // GQA 4, head_dim 64 (prefill kernel)
      {4, 1, 128, 32, 16, 1e7f},  // GQA 4, head_dim 128 (prefill kernel)
  };
  const std::vector<SeqSpec> specs = {{0, 13}, {5, 1}, {30, 4}, {3, 9}, {0, 1}, {17, 2}, {21, 40}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    for (const PoolFormat& fmt : kFormats) {
      const std::string what = "shape " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " x " +
                               std::to_string(s.head_dim) + " rot " + std::to_string(s.rot_dim) + " page " +
                               std::to_string(s.page_size) + " " + Name(fmt);
      RunAndCheck(s, specs, 50 + static_cast<uint32_t>(i), 3.0f, what, fmt);
      RunAndCheck(s, specs, 50 + static_cast<uint32_t>(i), 3.0f, what + " split-K", fmt, kc::AttentionPath::kSplitK);
      // The same shape as a pure decode step (split-K path).
      RunAndCheck(s, {{0, 1}, {70, 1}, {333, 1}}, 60 + static_cast<uint32_t>(i), 3.0f, what + " decode", fmt);
    }
  }
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
  auto attn = [&](const kc::KvPoolDevice& kv, int heads, void* ws,
                  kc::AttentionPath path = kc::AttentionPath::kAuto) {
    return kc::PagedAttention(c.d_q_out.data(), heads, 1.0f, kv, c.batch, gate, heads * 64, 64, out, ws, nullptr,
                              path);
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
  kv = c.kv;
  kv.dtype = kc::KvDtype::kFp8E4M3;
  kv.k_scale = 0.0f;  // fp8 needs positive finite scales
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);
  kv.k_scale = 1.0f;
  kv.v_scale = INFINITY;
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);
  kv = c.kv;
  kv.dtype = static_cast<kc::KvDtype>(7);
  EXPECT_EQ(attn(kv, 4, c.d_workspace.data()).code(), absl::StatusCode::kInvalidArgument);
  kc::RaggedBatchDevice wrong_max = c.batch;
  wrong_max.max_seq_tokens = c.T + 1;
  EXPECT_EQ(kc::PagedAttention(c.d_q_out.data(), 4, 1.0f, c.kv, wrong_max, gate, 4 * 64, 64, out, c.d_workspace.data(),
                               nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);

  kc::QkvInput in{c.d_qg.data(), 4 * 64, 64, c.d_k.data(), 2 * 32, c.d_v.data(), 2 * 32};
  auto write = [&](const kc::QkvInput& x, int rot, const kc::KvPoolDevice& pool) {
    return kc::QkNormRopeKvWrite(x, c.d_q_norm.data(), c.d_k_norm.data(), kEps, 4, rot, 1e4f, c.batch, pool,
                                 c.d_q_out.data(), nullptr);
  };
  EXPECT_EQ(write(in, 7, c.kv).code(), absl::StatusCode::kInvalidArgument);   // odd rot_dim
  EXPECT_EQ(write(in, 34, c.kv).code(), absl::StatusCode::kInvalidArgument);  // rot_dim > head_dim
  kc::QkvInput narrow = in;
  narrow.k_row_stride = 32;  // shorter than 2 kv heads
  EXPECT_EQ(write(narrow, 8, c.kv).code(), absl::StatusCode::kInvalidArgument);
  kc::QkvInput no_v = in;
  no_v.v = nullptr;
  EXPECT_EQ(write(no_v, 8, c.kv).code(), absl::StatusCode::kInvalidArgument);
  kv = c.kv;
  kv.dtype = kc::KvDtype::kFp8E4M3;
  kv.v_scale = -1.0f;
  EXPECT_EQ(write(in, 8, kv).code(), absl::StatusCode::kInvalidArgument);
  // An empty step is a no-op.
  kc::RaggedBatchDevice empty = c.batch;
  empty.num_tokens = 0;
  EXPECT_TRUE(kc::PagedAttention(c.d_q_out.data(), 4, 1.0f, c.kv, empty, gate, 4 * 64, 64, out, nullptr, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace sparkserve::gpu_test
