// GPU CausalConv1dSilu (kernels/cuda/gdn.h) against kernels/cpu conv1d.cc on seeded random inputs:
// 4B decode batches, ragged prefill + decode mixes whose fresh seqs (start_pos 0) have NaN-poisoned
// windows, MTP-verify columns, every kernel size, seqs across the kernel's token chunks, and
// argument errors.
#include <cstdint>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/gdn.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {
namespace {


struct ConvCase {
  int channels = 0, K = 4, x_pad = 0, num_slots = 0, max_columns = 1;
  std::vector<SeqSpec> seqs;
};

// max_seq_tokens_override > 0 replaces the batch's true most-tokens figure (the grid sizing hint).
void CheckConv(const ConvCase& cc, uint32_t seed, int max_seq_tokens_override = 0) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(seed);
  StepBatch batch = MakeBatch(cc.seqs);
  if (max_seq_tokens_override > 0) batch.device.max_seq_tokens = max_seq_tokens_override;
  const int T = batch.num_tokens, C = cc.channels, K = cc.K, W = K - 1, x_stride = C + cc.x_pad;
  const size_t slot_window = static_cast<size_t>(C) * W;
  const std::vector<float> x = RandomF32(static_cast<size_t>(T) * x_stride, rng);
  const std::vector<float> w = RandomF32(static_cast<size_t>(C) * K, rng, 0.5f);
  std::vector<float> window = RandomF32(cc.num_slots * slot_window, rng);
  for (const SeqSpec& sp : cc.seqs) {  // a fresh seq's slot must not be read
    if (sp.start_pos == 0) std::fill_n(window.begin() + sp.slot * slot_window, slot_window, kNaN);
  }

  // CPU reference on per-seq copies (zeros for fresh seqs).
  const size_t S = cc.seqs.size();
  std::vector<std::vector<float>> cpu_win(S), cpu_cols(S);
  std::vector<float*> win_ptrs(S), col_ptrs(S);
  for (size_t s = 0; s < S; ++s) {
    const SeqSpec& sp = cc.seqs[s];
    cpu_win[s] = sp.start_pos == 0 ? std::vector<float>(slot_window, 0.0f) : Slice(window, sp.slot * slot_window, slot_window);
    if (sp.keep) cpu_cols[s].assign(static_cast<size_t>(sp.tokens) * slot_window, 0.0f);
    win_ptrs[s] = cpu_win[s].data();
    col_ptrs[s] = sp.keep ? cpu_cols[s].data() : nullptr;
  }
  std::vector<float> want(static_cast<size_t>(T) * C);
  cpu::CausalConv1dSilu(x.data(), x_stride, C, w.data(), K, batch.seqs, win_ptrs,
                        AnyKeep(cc.seqs) ? std::span<float* const>(col_ptrs) : std::span<float* const>(),
                        want.data());

  const size_t slot_columns = static_cast<size_t>(cc.max_columns) * slot_window;
  DeviceBuffer<float> d_x = ToDevice(x), d_w = ToDevice(w), d_window = ToDevice(window);
  DeviceBuffer<float> d_cols = PoisonedF32(cc.num_slots * slot_columns);
  DeviceBuffer<float> d_out = PoisonedF32(static_cast<size_t>(T) * C);
  GPU_ASSERT_OK(cuda::CausalConv1dSilu(d_x.data(), x_stride, C, d_w.data(), K, batch.device, d_window.data(),
                                       d_cols.data(), cc.max_columns, d_out.data(), nullptr));
  const std::vector<float> out = ToHost(d_out), got_window = ToHost(d_window), got_cols = ToHost(d_cols);

  EXPECT_CLOSE(out, want, 1e-4, "conv out");
  std::vector<bool> used(cc.num_slots, false);
  for (size_t s = 0; s < S; ++s) {
    const SeqSpec& sp = cc.seqs[s];
    used[sp.slot] = true;
    // Windows and columns hold copies of inputs: exact.
    EXPECT_EQ(CountDiffering(got_window, sp.slot * slot_window, cpu_win[s], 0, slot_window), 0) << "window, seq " << s;
    const size_t base = sp.slot * slot_columns;
    const size_t kept = sp.keep ? std::min(sp.tokens, cc.max_columns) * slot_window : 0;
    EXPECT_EQ(CountDiffering(got_cols, base, cpu_cols[s], 0, kept), 0) << "columns, seq " << s;
    EXPECT_EQ(CountNotNaN(got_cols, base + kept, slot_columns - kept), 0)
        << "columns written past the seq's kept tokens (or without keep_columns), seq " << s;
  }
  for (int slot = 0; slot < cc.num_slots; ++slot) {
    if (used[slot]) continue;
    EXPECT_EQ(CountDiffering(got_window, slot * slot_window, window, slot * slot_window, slot_window), 0)
        << "window of unused slot " << slot;
    EXPECT_EQ(CountNotNaN(got_cols, slot * slot_columns, slot_columns), 0) << "columns of unused slot " << slot;
  }
}

TEST(GdnConvTest, DecodeBatch4B) {
  // 8192 channels = 2 * 16 * 128 + 32 * 128; six single-token seqs on scattered slots.
  ConvCase cc{8192, 4, 0, 10, 1, {}};
  const int slots[] = {5, 0, 3, 9, 2, 7};
  for (int i = 0; i < 6; ++i) cc.seqs.push_back({1, 10 + 31 * i, slots[i], false});
  CheckConv(cc, 101);
}

TEST(GdnConvTest, RaggedPrefillDecodeMix) {
  // 200 channels (a partial block), a strided input, fresh and continued prefill chunks (one
  // shorter than the window), decodes, and one seq recording columns.
  ConvCase cc{200, 4, 24, 8, 8, {}};
  cc.seqs = {{37, 0, 6, false}, {1, 12, 1, false}, {23, 41, 3, false}, {2, 0, 0, false},
             {1, 5, 4, true},   {5, 3, 7, true},   {1, 0, 2, false}};
  CheckConv(cc, 102);
}

TEST(GdnConvTest, OtherKernelSizes) {
  for (const int K : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE(fmt::format("K = {}", K));
    ConvCase cc{77, K, 3, 5, 9, {}};
    cc.seqs = {{9, 0, 4, true}, {1, 7, 0, false}, {6, 2, 2, true}, {3, 30, 1, false}, {70, 4, 3, false}};
    CheckConv(cc, 103 + static_cast<uint32_t>(K));
  }
}

TEST(GdnConvTest, LongPrefillAcrossTokenChunks) {
  // Seqs of 1, 31..33 and 200 tokens straddle the kernel's 32-token chunks; a kept seq longer than
  // max_columns records only its first max_columns columns (the neighbouring slot stays untouched).
  ConvCase cc{130, 4, 0, 6, 4, {}};
  cc.seqs = {{200, 0, 0, false}, {33, 9, 1, false}, {31, 0, 2, false}, {32, 64, 3, false}, {1, 2, 4, false},
             {7, 5, 5, true}};
  CheckConv(cc, 110);
}

TEST(GdnConvTest, UnderstatedMaxSeqTokensStillCoversEveryToken) {
  // The last token chunk runs to the seq's end, so a grid sized for 1 token per seq still covers a
  // 90-token prefill (the step's layout on the device decides, not the host hint).
  ConvCase cc{64, 4, 0, 3, 1, {}};
  cc.seqs = {{90, 0, 2, false}, {1, 3, 0, false}, {40, 17, 1, false}};
  CheckConv(cc, 111, /*max_seq_tokens_override=*/1);
  CheckConv(cc, 112, /*max_seq_tokens_override=*/33);
}

TEST(GdnConvTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  StepBatch batch = MakeBatch({{2, 0, 0, false}});
  DeviceBuffer<float> buf = PoisonedF32(4096);
  float* p = buf.data();
  auto conv = [&](int x_stride, int channels, int K, float* window, float* cols, int max_columns) {
    return cuda::CausalConv1dSilu(p, x_stride, channels, p, K, batch.device, window, cols, max_columns, p, nullptr);
  };
  EXPECT_TRUE(absl::IsInvalidArgument(conv(16, 16, 0, p, nullptr, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(conv(16, 16, 9, p, nullptr, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(conv(15, 16, 4, p, nullptr, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(conv(16, 0, 4, p, nullptr, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(conv(16, 16, 4, nullptr, nullptr, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(conv(16, 16, 4, p, p, 0)));
  const absl::Status s = conv(16, 16, 9, p, nullptr, 0);
  EXPECT_NE(std::string(s.message()).find("K = 9"), std::string::npos) << std::string(s.message());
  cuda::RaggedBatchDevice no_slots = batch.device;
  no_slots.slots = nullptr;
  EXPECT_TRUE(absl::IsInvalidArgument(
      cuda::CausalConv1dSilu(p, 16, 16, p, 4, no_slots, p, nullptr, 0, p, nullptr)));
  cuda::RaggedBatchDevice empty;
  GPU_ASSERT_OK(cuda::CausalConv1dSilu(p, 16, 16, p, 4, empty, p, nullptr, 0, p, nullptr));
}
}  // namespace
}  // namespace sparkserve::gpu_test::gdn
