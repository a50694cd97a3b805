// The tensor-core prefill attention kernel (prefill_attention.cu, reached through PagedAttention)
// against the CPU reference over ragged steps: prefill chunks from position 0 and with history,
// lengths that are multiples of no tile, decode / verify seqs mixed in (the split-K kernel takes
// those), shuffled pages of several sizes, the 4B shape and small ones, bf16 and fp8 pools, both
// tile shapes; the FP8 KV write byte for byte; and the timings of a 8192-token chunk and of decode
// at 8K context ("[ timing ]" lines of this test's output).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
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

std::string ShapeName(const Shape& s) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " x " + std::to_string(s.head_dim) + " page " +
         std::to_string(s.page_size);
}

// Writes the step, checks the pool, then runs attention on each path and checks every token
// against one CPU reference.
void CheckPaths(const Shape& sh, const std::vector<SeqSpec>& specs, uint32_t seed, const PoolFormat& fmt,
                const std::vector<kc::AttentionPath>& paths, const std::string& what) {
  AttentionCase c;
  BuildOptions opt;
  opt.fmt = fmt;
  Build(c, sh, specs, seed, 3.0f, opt);
  GPU_ASSERT_OK(RunWrite(c));
  CheckWrite(c, what);
  const std::vector<int> tokens = AllTokens(c);
  const std::vector<std::vector<float>> want = ReferenceOutputs(c, tokens);
  for (const kc::AttentionPath path : paths) {
    const std::string name = what + (path == kc::AttentionPath::kSplitK         ? " split-K"
                                     : path == kc::AttentionPath::kPrefillSmall ? " prefill small tile"
                                     : path == kc::AttentionPath::kPrefill      ? " prefill"
                                                                                : " auto");
    GPU_ASSERT_OK(RunAttention(c, path));
    CompareOutputs(c, tokens, want, path == kc::AttentionPath::kSplitK ? kSplitKTol : kPrefillTol, name);
  }
}

TEST(PrefillAttentionTest, RaggedChunks4B) {
  ASSERT_TRUE(HasCudaDevice());
  for (const PoolFormat& fmt : kFormats) {
    ASSERT_TRUE(kc::PrefillAttentionFits(kc::PrefillTile::kLarge, 256, fmt.dtype))
        << "this GPU cannot give the large prefill tile its shared memory ("
        << kc::PrefillAttentionSmemBytes(kc::PrefillTile::kLarge, 256, fmt.dtype) << " bytes)";
    // Chunks from 0 and with history, none a multiple of the 32-token tile or 64-key tile; a chunk
    // of 5 (just past the split-K kernel's 4), decode and verify seqs. 449 tokens: no splits.
    CheckPaths(k4B, {{0, 200}, {300, 77}, {1000, 1}, {50, 3}, {17, 130}, {0, 5}, {4, 1}, {0, 33}}, 101, fmt,
               {kc::AttentionPath::kAuto, kc::AttentionPath::kPrefillSmall, kc::AttentionPath::kSplitK},
               "ragged 4B " + Name(fmt));
  }
}

TEST(PrefillAttentionTest, FewTokensWithSplitK4B) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_GT(kc::AttentionSplits(10), 1) << "a 10-token step should split its decode contexts";
  // A 6-token chunk (prefill kernel) next to decode seqs whose contexts split: the combine must
  // leave the chunk's tokens alone.
  for (const PoolFormat& fmt : kFormats) {
    CheckPaths(k4B, {{0, 6}, {2000, 1}, {33, 1}, {9, 2}}, 111, fmt,
               {kc::AttentionPath::kAuto, kc::AttentionPath::kPrefillSmall}, "few tokens 4B " + Name(fmt));
  }
}

TEST(PrefillAttentionTest, SmallShapes) {
  ASSERT_TRUE(HasCudaDevice());
  const std::vector<Shape> shapes = {
      {8, 2, 64, 16, 8, 1e6f},     // GQA 4
      {12, 4, 64, 0, 1, 1e4f},     // GQA 3 (42 tokens a tile, 2 padding rows), page_size 1, no rotary
      {16, 1, 64, 16, 3, 1e4f},    // GQA 16: 8 tokens a tile
      {2, 2, 128, 32, 5, 1e6f},    // GQA 1: 128 tokens a tile
      {6, 1, 128, 8, 16, 1e7f},    // GQA 6
      {4, 4, 64, 64, 7, 1e4f},     // GQA 1, full rotary, page_size 7
  };
  const std::vector<SeqSpec> specs = {{0, 70}, {5, 1}, {130, 19}, {0, 5}, {64, 64}, {3, 129}, {200, 2}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    for (const PoolFormat& fmt : kFormats) {
      CheckPaths(shapes[i], specs, 120 + static_cast<uint32_t>(i), fmt, {kc::AttentionPath::kPrefill},
                 "shape " + ShapeName(shapes[i]) + " " + Name(fmt));
    }
  }
}

TEST(PrefillAttentionTest, Fp8WriteEncodesLikeTheCodec) {
  ASSERT_TRUE(HasCudaDevice());
  // Hand-known codes first (so the CPU codec the checks rely on is pinned too).
  EXPECT_EQ(quant::F32ToE4M3(1.0f), 0x38);
  EXPECT_EQ(quant::F32ToE4M3(1.0625f), 0x38);  // tie -> even mantissa 000
  EXPECT_EQ(quant::F32ToE4M3(1.1875f), 0x3a);  // tie -> even mantissa 010 (1.25)
  EXPECT_EQ(quant::F32ToE4M3(1e9f), 0x7e);     // saturates at 448
  EXPECT_EQ(quant::F32ToE4M3(-INFINITY), 0xfe);
  for (const Shape& sh : {Shape{4, 2, 64, 16, 4, 1e4f}, k4B}) {
    AttentionCase c;
    BuildOptions opt;
    opt.fmt = kFp8Pool;
    opt.special_v = true;
    Build(c, sh, {{0, 9}, {21, 1}, {40, 17}}, 131, 1.0f, opt);
    GPU_ASSERT_OK(RunWrite(c));
    CheckWrite(c, "fp8 write " + ShapeName(sh));
    // The special values landed where expected: v[0] (token 0, kv head 0, dim 0) = 1.0625 * v_scale.
    const std::vector<uint8_t> pv = ToHost(c.d_pool_v);
    const size_t slot0 = c.PoolOffset(0, 0);
    EXPECT_EQ(pv[slot0], 0x38) << "v = 1.0625 * v_scale should store code 0x38 (1.0)";
    // Attention over the saturated / subnormal values still matches the decoded reference.
    GPU_ASSERT_OK(RunAttention(c));
    CheckAttention(c, "fp8 special values " + ShapeName(sh), kPrefillTol);
  }
}

TEST(PrefillAttentionTest, RejectsShapesItCannotTake) {
  ASSERT_TRUE(HasCudaDevice());
  AttentionCase c;
  Build(c, {4, 2, 32, 8, 4, 1e4f}, {{0, 10}, {3, 1}}, 151, 1.0f);
  GPU_ASSERT_OK(RunWrite(c));
  // head_dim 32: the prefill kernel refuses when pinned, kAuto falls back to the split-K kernel.
  EXPECT_EQ(RunAttention(c, kc::AttentionPath::kPrefill).code(), absl::StatusCode::kInvalidArgument);
  GPU_ASSERT_OK(RunAttention(c, kc::AttentionPath::kAuto));
  CheckAttention(c, "head_dim 32 fallback", kSplitKTol);
  AttentionCase d;
  Build(d, {4, 1, 128, 32, 16, 1e4f}, {{0, 10}}, 152, 1.0f);
  GPU_ASSERT_OK(RunWrite(d));
  EXPECT_EQ(RunAttention(d, kc::AttentionPath::kPrefillSmall).code(), absl::StatusCode::kInvalidArgument);
  AttentionCase e;
  Build(e, {34, 2, 64, 8, 4, 1e4f}, {{0, 10}}, 153, 1.0f);  // 17 query heads a kv head
  GPU_ASSERT_OK(RunWrite(e));
  EXPECT_EQ(RunAttention(e, kc::AttentionPath::kPrefill).code(), absl::StatusCode::kInvalidArgument);
  GPU_ASSERT_OK(RunAttention(e, kc::AttentionPath::kAuto));
  CheckAttention(e, "group 17 fallback", kSplitKTol);
}

// One 8192-token chunk from position 0: sampled tokens against the CPU, then the kernel timed.
void Chunk8192(const PoolFormat& fmt) {
  AttentionCase c;
  BuildOptions opt;
  opt.fmt = fmt;
  opt.fast_random = true;
  Build(c, k4B, {{0, 8192}}, 71, 1.0f, opt);
  GPU_ASSERT_OK(RunWrite(c));
  GPU_ASSERT_OK(RunAttention(c));
  CheckAttention(c, "prefill 8192 " + Name(fmt), kPrefillTol,
                 {0, 1, 7, 8, 9, 31, 32, 63, 64, 1000, 4095, 4096, 8159, 8160, 8183, 8184, 8191});
  const float ms = TimeMs([&] { (void)RunAttention(c, kc::AttentionPath::kAuto, nullptr, false); }, 5);
  const float small_ms = TimeMs([&] { (void)RunAttention(c, kc::AttentionPath::kPrefillSmall, nullptr, false); }, 3);
  std::printf("[ timing ] 4B prefill chunk of 8192 tokens, %s KV: PagedAttention %.2f ms (%.0f TFLOP/s causal), "
              "small tile %.2f ms\n",
              Name(fmt).c_str(), ms, 8192.0 * 8193 / 2 * 16 * 256 * 4 / (ms * 1e-3) / 1e12, small_ms);
  if (fmt.dtype == kc::KvDtype::kBf16) {
    const float old_ms = TimeMs([&] { (void)RunAttention(c, kc::AttentionPath::kSplitK, nullptr, false); }, 1);
    std::printf("[ timing ] 4B prefill chunk of 8192 tokens, bf16 KV: split-K kernel %.2f ms\n", old_ms);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(PrefillAttentionTest, Chunk8192Bf16) {
  ASSERT_TRUE(HasCudaDevice());
  Chunk8192(kBf16Pool);
}

TEST(PrefillAttentionTest, Chunk8192Fp8) {
  ASSERT_TRUE(HasCudaDevice());
  Chunk8192(kFp8Pool);
}

// Decode at batch 1, context 8192, timed over kSeqs seqs in turn so that no launch finds its
// K/V (32 MiB bf16, 16 MiB fp8 a seq) in the L2 left by the previous one. The pools hold a
// constant pattern (timing only; correctness at long contexts is Decode4BContexts1To5000's).
TEST(PrefillAttentionTest, Decode8KTiming4B) {
  ASSERT_TRUE(HasCudaDevice());
  constexpr int kSeqs = 6, kContext = 8192;
  for (const PoolFormat& fmt : kFormats) {
    AttentionCase c;
    BuildOptions opt;
    opt.fmt = fmt;
    opt.fast_random = true;
    opt.no_history = true;
    Build(c, k4B, std::vector<SeqSpec>(kSeqs, SeqSpec{kContext - 1, 1}), 141, 1.0f, opt);
    // bf16 0x3c3c ~ 0.0115, fp8 0x3c = 1.5: finite everywhere.
    ASSERT_EQ(cudaMemset(c.d_pool_k.data(), 0x3c, c.d_pool_k.size()), cudaSuccess);
    ASSERT_EQ(cudaMemset(c.d_pool_v.data(), 0x3c, c.d_pool_v.size()), cudaSuccess);
    GPU_ASSERT_OK(RunWrite(c));
    const int H = k4B.heads, hd = k4B.head_dim;
    const std::vector<int32_t> one_seq = {0, 1}, seq0 = {0};
    DeviceBuffer<int32_t> d_tb = ToDevice(one_seq), d_seq = ToDevice(seq0);
    std::vector<kc::RaggedBatchDevice> batches(kSeqs);
    for (int s = 0; s < kSeqs; ++s) {
      kc::RaggedBatchDevice& b = batches[s];
      b = c.batch;
      b.num_seqs = 1;
      b.num_tokens = 1;
      b.max_seq_tokens = 1;
      b.token_begin = d_tb.data();
      b.token_seq = d_seq.data();
      b.start_pos = c.d_start_pos.data() + s;
      b.positions = c.d_positions.data() + s;
      b.page_table = c.d_page_table.data() + static_cast<size_t>(s) * c.pages_stride;
    }
    int next = 0;
    absl::Status status;
    const float ms = TimeMs(
        [&] {
          const int s = next++ % kSeqs;
          const absl::Status st = kc::PagedAttention(
              c.d_q_out.data() + static_cast<size_t>(s) * H * hd, H, c.scale, c.kv, batches[s],
              c.d_qg.data() + static_cast<size_t>(s) * H * 2 * hd + hd, H * 2 * hd, 2 * hd,
              reinterpret_cast<__half*>(c.d_out.data()) + static_cast<size_t>(s) * H * hd, c.d_workspace.data(),
              nullptr);
          if (!st.ok()) status = st;
        },
        4 * kSeqs);
    GPU_ASSERT_OK(status);
    const double bytes = 2.0 * kContext * k4B.kv_heads * hd * kc::KvDtypeBytes(fmt.dtype);
    std::printf("[ timing ] 4B decode batch 1, context %d, %s KV (L2-cold): PagedAttention %.1f us (%.0f GB/s of K/V)\n",
                kContext, Name(fmt).c_str(), ms * 1e3f, bytes / (ms * 1e-3) / 1e9);
    // The output is finite (the pattern gives a well-defined softmax).
    const std::vector<uint16_t> out = ToHost(c.d_out);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(std::isfinite(core::F16ToF32(out[i]))) << Name(fmt) << ": output element " << i << " not finite";
    }
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test
