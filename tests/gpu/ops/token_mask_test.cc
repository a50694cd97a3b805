// Structured-output masks on the GPU (kernels/cuda/token_mask.h): every masked logit becomes -inf
// and every other one keeps its bits, for full rows and for a tensor-parallel vocabulary slice; and
// mask + GPU sampling picks the same tokens as engine::Sampler given the same mask (greedy rows
// exactly; sampled rows from the few allowed tokens).
#include "kernels/cuda/token_mask.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "kernels/cuda/sampling.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

using kernels::cuda::TokenMaskInputs;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool Allowed(const std::vector<uint32_t>& words, int words_per_row, int row, int64_t token) {
  return (words[static_cast<size_t>(row) * words_per_row + static_cast<size_t>(token >> 5)] >> (token & 31)) & 1u;
}

// Masks with every density: all allowed, none, a few tokens, random halves.
std::vector<uint32_t> RandomMasks(int mask_rows, int words_per_row, std::mt19937& rng) {
  std::vector<uint32_t> words(static_cast<size_t>(mask_rows) * words_per_row);
  for (int r = 0; r < mask_rows; ++r) {
    uint32_t* w = words.data() + static_cast<size_t>(r) * words_per_row;
    switch (r % 4) {
      case 0: std::fill(w, w + words_per_row, 0xFFFFFFFFu); break;
      case 1: std::fill(w, w + words_per_row, 0u); w[rng() % words_per_row] = 1u << (rng() % 32); break;
      case 2:
        std::fill(w, w + words_per_row, 0u);
        for (int k = 0; k < 40; ++k) w[rng() % words_per_row] |= 1u << (rng() % 32);
        break;
      default: for (int i = 0; i < words_per_row; ++i) w[i] = static_cast<uint32_t>(rng()); break;
    }
  }
  return words;
}

void CheckMasked(int rows, int vocab, int64_t vocab_begin, int words_per_row, uint32_t seed) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(seed);
  const int mask_rows = 9;
  const std::vector<float> logits = RandomF32(static_cast<size_t>(rows) * vocab, rng, 3.0f);
  const std::vector<uint32_t> words = RandomMasks(mask_rows, words_per_row, rng);
  std::vector<int32_t> logit_rows, mask_rows_of;
  for (int r = 0; r < rows; ++r) {
    if (r % 3 == 2) continue;  // some rows are not constrained
    logit_rows.push_back(r);
    mask_rows_of.push_back(static_cast<int32_t>(rng() % mask_rows));
  }
  auto d_logits = ToDevice(logits);
  auto d_words = ToDevice(words);
  auto d_lr = ToDevice(logit_rows);
  auto d_mr = ToDevice(mask_rows_of);
  TokenMaskInputs in{d_logits.data(), rows, vocab, vocab_begin, d_words.data(), words_per_row,
                     d_lr.data(), d_mr.data(), static_cast<int>(logit_rows.size())};
  GPU_ASSERT_OK(kernels::cuda::ApplyTokenMasks(in, nullptr));
  const std::vector<float> got = ToHost(d_logits);
  std::vector<int> mask_of_row(static_cast<size_t>(rows), -1);
  for (size_t i = 0; i < logit_rows.size(); ++i) mask_of_row[static_cast<size_t>(logit_rows[i])] = mask_rows_of[i];
  int64_t masked = 0, kept = 0;
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < vocab; ++v) {
      const size_t i = static_cast<size_t>(r) * vocab + v;
      const int m = mask_of_row[static_cast<size_t>(r)];
      if (m >= 0 && !Allowed(words, words_per_row, m, vocab_begin + v)) {
        ASSERT_EQ(got[i], kNegInf) << "row " << r << " token " << vocab_begin + v;
        ++masked;
      } else {
        ASSERT_EQ(std::memcmp(&got[i], &logits[i], sizeof(float)), 0) << "row " << r << " token " << vocab_begin + v;
        ++kept;
      }
    }
  }
  EXPECT_GT(masked, 0);
  EXPECT_GT(kept, 0);
}

TEST(TokenMask, FullVocabularyRows) { CheckMasked(12, 248320, 0, 248320 / 32, 1); }

TEST(TokenMask, OddVocabularyAndATensorParallelSlice) {
  CheckMasked(7, 1000, 0, (1000 + 31) / 32, 2);
  // Rank 1 of 2 over a 1997-token vocabulary: columns 999..1996 read bits 999.. of each row.
  CheckMasked(5, 998, 999, (1997 + 31) / 32, 3);
}

TEST(TokenMask, RefusesMasksTooNarrowForTheVocabulary) {
  float x = 0;
  uint32_t w = 0;
  int32_t i = 0;
  TokenMaskInputs in{&x, 1, 100, 0, &w, 3, &i, &i, 1};  // 3 words = 96 tokens < 100
  EXPECT_FALSE(kernels::cuda::ApplyTokenMasks(in, nullptr).ok());
}

// Mask then sample on the GPU, against the host sampler given the same mask.
TEST(TokenMask, MaskedSamplingMatchesTheHostSampler) {
  ASSERT_TRUE(HasCudaDevice());
  const int vocab = 5000, words_per_row = (vocab + 31) / 32, rows = 24;
  std::mt19937 rng(4);
  const std::vector<float> logits = RandomF32(static_cast<size_t>(rows) * vocab, rng, 2.0f);
  std::vector<uint32_t> words(static_cast<size_t>(rows) * words_per_row, 0u);
  for (int r = 0; r < rows; ++r) {  // 1..20 allowed tokens, the model's favourite mostly not among them
    for (int k = 0, n = 1 + r % 20; k < n; ++k) {
      const int t = static_cast<int>(rng() % vocab);
      words[static_cast<size_t>(r) * words_per_row + t / 32] |= 1u << (t % 32);
    }
  }
  std::vector<scheduler::SamplingParams> params(rows);
  std::vector<kernels::cuda::SamplingRow> gpu_params(rows);
  for (int r = 0; r < rows; ++r) {
    params[r].temperature = r % 2 ? 1.0f : 0.0f;
    params[r].logprobs = 2;
    gpu_params[r].temperature = params[r].temperature;
    gpu_params[r].num_logprobs = 2;
    gpu_params[r].uniform = engine::UniformAt(100 + r, 0);
  }
  std::vector<int32_t> all_rows(rows), identity(rows);
  for (int r = 0; r < rows; ++r) all_rows[r] = identity[r] = r;
  auto d_logits = ToDevice(logits);
  auto d_words = ToDevice(words);
  auto d_rows = ToDevice(all_rows);
  auto d_masks = ToDevice(identity);
  TokenMaskInputs min{d_logits.data(), rows, vocab, 0, d_words.data(), words_per_row, d_rows.data(), d_masks.data(), rows};
  GPU_ASSERT_OK(kernels::cuda::ApplyTokenMasks(min, nullptr));
  auto d_params = ToDevice(gpu_params);
  auto ids = ToDevice(std::vector<int32_t>(rows, -7));
  auto status = ToDevice(std::vector<int32_t>(rows, -7));
  auto top_ids = ToDevice(std::vector<int32_t>(static_cast<size_t>(rows) * kernels::cuda::kMaxGpuLogprobs, -7));
  auto lp = PoisonedF32(rows);
  auto top_lp = PoisonedF32(static_cast<size_t>(rows) * kernels::cuda::kMaxGpuLogprobs);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kernels::cuda::SampleWorkspaceBytes(rows, vocab));
  ASSERT_TRUE(ws.ok());
  kernels::cuda::SamplingInputs sin{d_logits.data(), rows, vocab, d_params.data(), nullptr, nullptr, nullptr, nullptr, nullptr};
  kernels::cuda::SamplingOutputs sout{ids.data(), lp.data(), top_ids.data(), top_lp.data(), status.data()};
  GPU_ASSERT_OK(kernels::cuda::Sample(sin, sout, ws->data(), nullptr));
  const std::vector<int32_t> gpu_ids = ToHost(ids), gpu_status = ToHost(status);
  const std::vector<float> gpu_lp = ToHost(lp);
  engine::Sampler sampler(vocab);
  for (int r = 0; r < rows; ++r) {
    engine::SamplingContext ctx;
    ctx.params = &params[r];
    ctx.rng_seed = 100 + static_cast<uint64_t>(r);
    ctx.allowed = std::span<const uint32_t>(words.data() + static_cast<size_t>(r) * words_per_row, words_per_row);
    auto cpu = sampler.Sample(std::span<const float>(logits.data() + static_cast<size_t>(r) * vocab, vocab), ctx);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_EQ(gpu_status[r], 0) << "row " << r;
    EXPECT_TRUE(Allowed(words, words_per_row, r, gpu_ids[r])) << "row " << r << " sampled a masked token";
    EXPECT_EQ(gpu_ids[r], cpu->id) << "row " << r;
    EXPECT_NEAR(gpu_lp[r], cpu->logprob, 1e-5) << "row " << r;
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test
