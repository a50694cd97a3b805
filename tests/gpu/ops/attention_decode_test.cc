// The tensor-core decode kernel of PagedAttention (kernels/cuda/attention_decode.cu) against the CPU
// reference: many seqs of ragged contexts (1 .. 8K keys), MTP-verify seqs (2-4 tokens: several
// column tiles, splits whose keys all follow a column's position), GQA groups 1..16, head dims 64 /
// 128 / 256, odd page sizes, bf16 and fp8 pools, split and unsplit grids, NaN-poisoned outputs and
// workspace. The CPU attention runs on the very pool (decoded) and q the GPU wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_kernels.h"
#include "tests/gpu/ops/attention_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

using namespace attention;  // NOLINT: the shared attention test vocabulary

const PoolFormat kFormats[] = {kBf16Pool, kFp8Pool};

int Sms() {
  int dev = 0, n = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  return n;
}

int MaxTokens(const std::vector<SeqSpec>& specs) {
  int most = 1;
  for (const SeqSpec& s : specs) most = std::max(most, s.num_tokens);
  return most;
}

int TotalTokens(const std::vector<SeqSpec>& specs) {
  int n = 0;
  for (const SeqSpec& s : specs) n += s.num_tokens;
  return n;
}

int SplitsFor(const Shape& sh, const std::vector<SeqSpec>& specs) {
  return kc::DecodeAttentionSplits(static_cast<int>(specs.size()), TotalTokens(specs), MaxTokens(specs), sh.kv_heads,
                                   sh.heads / sh.kv_heads);
}

std::string ShapeName(const Shape& s) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " x " + std::to_string(s.head_dim) + " page " +
         std::to_string(s.page_size);
}

// Builds the step, writes it, runs `path` (poisoned output) and checks every token; with
// peaky = true also a 4x sharper softmax over the same pool.
void CheckDecode(const Shape& sh, const std::vector<SeqSpec>& specs, uint32_t seed, const PoolFormat& fmt,
                 const std::string& what, kc::AttentionPath path = kc::AttentionPath::kDecode, bool peaky = false) {
  AttentionCase c;
  BuildOptions opt;
  opt.fmt = fmt;
  opt.fast_random = true;
  Build(c, sh, specs, seed, 3.0f, opt);
  GPU_ASSERT_OK(RunWrite(c));
  GPU_ASSERT_OK(RunAttention(c, path));
  const std::string name = what + " " + Name(fmt) + " (" + std::to_string(SplitsFor(sh, specs)) + " splits)";
  CheckAttention(c, name, kSplitKTol);
  if (peaky) {
    c.scale *= 4.0f;
    GPU_ASSERT_OK(RunAttention(c, path));
    CheckAttention(c, name + ", peaky softmax", kSplitKTol);
  }
}

TEST(AttentionDecodeTest, SplitChoiceFollowsSeqsAndSms) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_TRUE(kc::DecodeAttentionSupports(256) && kc::DecodeAttentionSupports(128) && kc::DecodeAttentionSupports(64));
  EXPECT_FALSE(kc::DecodeAttentionSupports(32));
  EXPECT_FALSE(kc::DecodeAttentionSupports(24));
  const int target = kc::kDecodeBlocksPerSm * Sms();
  // The 4B's decode shapes: 4 kv heads, group 4 (one column tile a token of 4 heads).
  EXPECT_EQ(kc::DecodeAttentionColumnTiles(1, 4), 1);
  EXPECT_EQ(kc::DecodeAttentionColumnTiles(2, 4), 1);
  EXPECT_EQ(kc::DecodeAttentionColumnTiles(3, 4), 2);
  EXPECT_EQ(kc::DecodeAttentionColumnTiles(9, 4), 2) << "seqs past 4 tokens are not the decode kernel's";
  EXPECT_EQ(kc::DecodeAttentionColumnTiles(1, 16), 2);
  for (int seqs : {1, 8, 64, 256}) {
    const int z = kc::DecodeAttentionSplits(seqs, seqs, 1, 4, 4);
    EXPECT_GE(z, 1);
    EXPECT_EQ(z, std::max(1, target / (seqs * 4))) << seqs << " seqs";
    // The partials fit the workspace the runner sizes for that many tokens.
    if (z > 1) {
      EXPECT_GE(kc::PagedAttentionWorkspaceBytes(seqs, 16, 256),
                kc::AttentionPartialFloats(z, seqs, 16, 256) * sizeof(float));
    }
  }
  // A mixed step's many prefill tokens cap the splits (and so the workspace) of its decode seqs:
  // the workspace stops growing with the step's tokens, at most `target` rows of partials.
  EXPECT_EQ(kc::DecodeAttentionSplits(2, 4000, 4000, 4, 4), std::max(1, target / 4000));
  EXPECT_EQ(kc::PagedAttentionWorkspaceBytes(8192, 16, 256), kc::PagedAttentionWorkspaceBytes(target, 16, 256));
  EXPECT_LE(kc::PagedAttentionWorkspaceBytes(8192, 16, 256), static_cast<size_t>(target) * 16 * 258 * sizeof(float));
}

TEST(AttentionDecodeTest, SixtyFourSeqsOfRaggedContexts4B) {
  ASSERT_TRUE(HasCudaDevice());
  // Contexts 1 .. 8192 (tile and page edges, a context of one key), the rest random up to 300.
  std::vector<SeqSpec> specs;
  for (int pos : {0, 1, 14, 15, 16, 17, 31, 100, 255, 256, 257, 1000, 1023, 2047, 4095, 8191})
    specs.push_back({pos, 1});
  std::mt19937 rng(201);
  while (specs.size() < 64) specs.push_back({static_cast<int>(rng() % 300), 1});
  std::shuffle(specs.begin(), specs.end(), rng);
  ASSERT_GT(SplitsFor(k4B, specs), 1) << "64 seqs x 4 kv heads should split on this GPU";
  for (const PoolFormat& fmt : kFormats) CheckDecode(k4B, specs, 202, fmt, "64 ragged decode seqs 4B");
}

TEST(AttentionDecodeTest, LongContextsPeaky4B) {
  ASSERT_TRUE(HasCudaDevice());
  // Batch 1 and 3 at long contexts: the most splits (many empty for the short seq).
  for (const PoolFormat& fmt : kFormats) {
    CheckDecode(k4B, {{8191, 1}}, 211, fmt, "batch 1 context 8192 4B", kc::AttentionPath::kDecode, true);
    CheckDecode(k4B, {{6000, 1}, {3, 1}, {1500, 1}}, 212, fmt, "batch 3 4B", kc::AttentionPath::kDecode, true);
  }
}

TEST(AttentionDecodeTest, VerifySteps4B) {
  ASSERT_TRUE(HasCudaDevice());
  // 2-4 tokens a seq (two column tiles for 3-4), next to single tokens. {15, 2}: with splits of 16
  // keys the last split holds only position 16, after token 0's position: that column's partial
  // has no key (m = -inf) and must weigh nothing.
  const std::vector<SeqSpec> specs = {{100, 2}, {7, 3}, {0, 4}, {2000, 4}, {50, 1}, {16, 3}, {15, 2}, {0, 1}, {333, 4}};
  ASSERT_GT(SplitsFor(k4B, specs), 1);
  for (const PoolFormat& fmt : kFormats) {
    CheckDecode(k4B, specs, 221, fmt, "verify 4B", kc::AttentionPath::kDecode, true);
    CheckDecode(k4B, specs, 222, fmt, "verify 4B auto", kc::AttentionPath::kAuto);
  }
}

TEST(AttentionDecodeTest, OddShapesAndPages) {
  ASSERT_TRUE(HasCudaDevice());
  const std::vector<Shape> shapes = {
      {16, 4, 256, 64, 7, 1e7f},  // the 4B with 7-token pages: tiles straddle pages
      {2, 2, 64, 16, 1, 1e4f},    // GQA 1, one-token pages
      {4, 2, 64, 64, 3, 1e4f},    // GQA 2, page 3, full rotary
      {6, 2, 64, 0, 5, 1e4f},     // GQA 3: 9 columns for a 3-token seq (2 tiles), no rotary
      {12, 2, 128, 32, 5, 1e6f},  // GQA 6: 24 columns for 4 tokens (3 tiles)
      {16, 1, 64, 16, 4, 1e6f},   // GQA 16: 2 tiles a token
      {8, 1, 128, 32, 16, 1e7f},  // GQA 8: one full tile a token
  };
  const std::vector<SeqSpec> specs = {{0, 1}, {5, 2}, {40, 3}, {77, 4}, {300, 1}, {16, 1}, {999, 2}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (const PoolFormat& fmt : kFormats) {
      CheckDecode(shapes[i], specs, 230 + static_cast<uint32_t>(i), fmt, "shape " + ShapeName(shapes[i]));
    }
  }
}

TEST(AttentionDecodeTest, ManySeqsWithoutSplits4B) {
  ASSERT_TRUE(HasCudaDevice());
  // Enough seqs x kv heads to fill every SM: one split, the kernel gates and writes f16 itself.
  const int seqs = kc::kDecodeBlocksPerSm * Sms() / 4 + 3;
  std::mt19937 rng(241);
  std::vector<SeqSpec> specs;
  for (int s = 0; s < seqs; ++s) specs.push_back({static_cast<int>(rng() % 200), s % 11 == 0 ? 2 : 1});
  ASSERT_EQ(SplitsFor(k4B, specs), 1);
  for (const PoolFormat& fmt : kFormats) CheckDecode(k4B, specs, 242, fmt, std::to_string(seqs) + " decode seqs 4B");
}

TEST(AttentionDecodeTest, MixedWithPrefillChunks4B) {
  ASSERT_TRUE(HasCudaDevice());
  // The flash kernel takes the chunks, the decode kernel the short seqs, in one step; with a head
  // dim the prefill kernel does not take (none here) the split-K kernel would take the chunks.
  const std::vector<SeqSpec> specs = {{0, 37}, {1200, 1}, {50, 20}, {9, 3}, {4000, 1}, {0, 6}};
  for (const PoolFormat& fmt : kFormats) {
    AttentionCase c;
    BuildOptions opt;
    opt.fmt = fmt;
    opt.fast_random = true;
    Build(c, k4B, specs, 251, 3.0f, opt);
    GPU_ASSERT_OK(RunWrite(c));
    GPU_ASSERT_OK(RunAttention(c, kc::AttentionPath::kDecode));
    CheckAttention(c, "mixed step 4B " + Name(fmt), kPrefillTol);
    // The short seqs alone must match the split-K kernel's tolerance.
    std::vector<int> short_tokens;
    for (int t = 0; t < c.T; ++t) {
      if (specs[c.token_seq[t]].num_tokens <= kc::kPerTokenMaxTokens) short_tokens.push_back(t);
    }
    CheckAttention(c, "mixed step 4B, decode seqs " + Name(fmt), kSplitKTol, short_tokens);
  }
}

TEST(AttentionDecodeTest, RejectsWhatItCannotTake) {
  ASSERT_TRUE(HasCudaDevice());
  AttentionCase c;
  Build(c, {4, 2, 32, 8, 4, 1e4f}, {{3, 1}, {9, 1}}, 261, 1.0f);
  GPU_ASSERT_OK(RunWrite(c));
  // head_dim 32: the decode kernel refuses when pinned, kAuto falls back to the split-K kernel.
  EXPECT_EQ(RunAttention(c, kc::AttentionPath::kDecode).code(), absl::StatusCode::kInvalidArgument);
  GPU_ASSERT_OK(RunAttention(c, kc::AttentionPath::kAuto));
  CheckAttention(c, "head_dim 32 fallback", kSplitKTol);

  AttentionCase d;
  Build(d, k4B, {{100, 1}}, 262, 1.0f);
  GPU_ASSERT_OK(RunWrite(d));
  ASSERT_GT(SplitsFor(k4B, d.specs), 1);
  const int hd = k4B.head_dim;
  auto attn = [&](void* ws) {
    return kc::PagedAttention(d.d_q_out.data(), k4B.heads, d.scale, d.kv, d.batch, d.d_qg.data() + hd,
                              k4B.heads * 2 * hd, 2 * hd, reinterpret_cast<__half*>(d.d_out.data()), ws, nullptr,
                              kc::AttentionPath::kDecode);
  };
  EXPECT_EQ(attn(nullptr).code(), absl::StatusCode::kInvalidArgument);                   // splits need a workspace
  EXPECT_EQ(attn(d.d_workspace.data() + 4).code(), absl::StatusCode::kInvalidArgument);  // not 16-byte aligned
  GPU_ASSERT_OK(attn(d.d_workspace.data()));
  CheckAttention(d, "batch 1 after the refusals", kSplitKTol);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace sparkserve::gpu_test
