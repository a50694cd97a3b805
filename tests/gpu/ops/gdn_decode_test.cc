// GPU Gated DeltaNet decode kernel (kernels/cuda/gdn_decode.cu: GdnKernel::kDecode, and kAuto on
// decode steps) against the CPU chain of gdn_reference.h on seeded random inputs: the 4B's shape at
// 1, 3, 64 and 130 seqs, both block layouts (whole head / 32-column clusters) forced on the 4B and on
// small odd shapes, carried states in shuffled slots beside a fresh seq (NaN-poisoned slot), padded
// rows, poisoned outputs, untouched spare slots, seqs of != 1 token left as they were, kAuto ==
// kDecode (bit for bit) and == kSequential (to f32 rounding), graph capture, argument errors.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/gdn_kernels.h"
#include "tests/gpu/ops/gdn_reference.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {
namespace {

constexpr cuda::GdnShape k4B{16, 32, 128, 128};

const char* LayoutName(cuda::GdnDecodeLayout layout) {
  switch (layout) {
    case cuda::GdnDecodeLayout::kAuto: return "auto";
    case cuda::GdnDecodeLayout::kWholeHead: return "whole head";
    case cuda::GdnDecodeLayout::kSplitColumns: return "split columns";
  }
  return "?";
}

std::string ShapeName(const cuda::GdnShape& s) {
  return fmt::format("nk {} nv {} dk {} dv {}", s.nk, s.nv, s.dk, s.dv);
}

// A decode step: `seqs` 1-token seqs in shuffled slots among seqs + spare (the spare slots are not in
// the batch and must stay bit-identical); seq fresh_at (if in range) starts fresh (start_pos 0, its
// slot NaN-poisoned), the others carry state at various positions.
GdnCase DecodeCase(const cuda::GdnShape& shape, int seqs, int spare, int fresh_at, std::mt19937& rng, int mixed_pad = 0,
                   int z_pad = 0) {
  GdnCase gc{shape, seqs + spare, 1, mixed_pad, z_pad, {}};
  std::vector<int> slots(static_cast<size_t>(gc.num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  for (int s = 0; s < seqs; ++s) gc.seqs.push_back({1, s == fresh_at ? 0 : 1 + (s * 37) % 900, slots[s], false});
  return gc;
}

// MakeGdnInputs with the states filled by a cheap generator (130 seqs of the 4B are 70M floats, which
// mt19937 + normal_distribution take seconds to draw); fresh seqs' slots NaN as there.
GdnInputs DecodeInputs(const GdnCase& gc, int T, std::mt19937& rng) {
  GdnCase no_states = gc;
  no_states.num_slots = 0;
  no_states.seqs.clear();
  GdnInputs in = MakeGdnInputs(no_states, T, rng);
  const size_t slot_state = static_cast<size_t>(gc.shape.nv) * gc.shape.dk * gc.shape.dv;
  in.state.resize(gc.num_slots * slot_state);
  uint32_t x = static_cast<uint32_t>(rng()) | 1u;  // xorshift32, uniform in [-0.5, 0.5)
  for (float& f : in.state) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(x >> 8) * (1.0f / 16777216.0f) - 0.5f;
  }
  for (const SeqSpec& sp : gc.seqs) {
    if (sp.start_pos == 0) std::fill_n(in.state.begin() + sp.slot * slot_state, slot_state, kNaN);
  }
  return in;
}

// The decode launcher with a forced layout (kAuto: what GatedDeltaNet picks), synchronised.
void LaunchLayout(const GdnCase& gc, const StepBatch& batch, GdnDevice& d, cuda::GdnDecodeLayout layout) {
  ASSERT_EQ(cuda::LaunchGatedDeltaNetDecode(d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f,
                                            batch.device, layout, d.state.data(), d.out.data(), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// One decode case against the CPU: through GatedDeltaNetWith(kDecode) when layout is kAuto, else the
// launcher with that layout forced.
void CheckDecode(const GdnCase& gc, uint32_t seed, cuda::GdnDecodeLayout layout) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  SCOPED_TRACE(
      fmt::format("{}, {} seqs, layout {} (auto picks {})", ShapeName(gc.shape), gc.seqs.size(), LayoutName(layout),
                  cuda::GdnDecodeUsesWholeHeads(gc.shape, static_cast<int>(gc.seqs.size())) ? "whole head" : "split"));
  std::mt19937 rng(seed);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = DecodeInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  if (layout == cuda::GdnDecodeLayout::kAuto) {
    GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr, cuda::GdnKernel::kDecode));
  } else {
    LaunchLayout(gc, batch, d, layout);
  }
  CompareGdn(gc, in, ref, d);
}

TEST(GatedDeltaNetDecodeTest, Batch1Seq4B) {
  std::mt19937 rng(701);
  CheckDecode(DecodeCase(k4B, 1, 2, -1, rng), 702, cuda::GdnDecodeLayout::kAuto);
}

TEST(GatedDeltaNetDecodeTest, Batch3Seqs4BWithFreshSeq) {
  std::mt19937 rng(711);
  CheckDecode(DecodeCase(k4B, 3, 2, 1, rng, 8, 12), 712, cuda::GdnDecodeLayout::kAuto);
}

TEST(GatedDeltaNetDecodeTest, Batch64Seqs4BWithFreshSeq) {
  std::mt19937 rng(721);
  CheckDecode(DecodeCase(k4B, 64, 3, 40, rng), 722, cuda::GdnDecodeLayout::kAuto);
}

TEST(GatedDeltaNetDecodeTest, Batch130Seqs4BWithFreshSeq) {
  std::mt19937 rng(731);
  CheckDecode(DecodeCase(k4B, 130, 3, 0, rng), 732, cuda::GdnDecodeLayout::kAuto);
}

TEST(GatedDeltaNetDecodeTest, BothLayouts4B) {
  // Whatever the SM count makes kAuto pick, each layout at the 4B's shape (padded rows, a fresh seq).
  for (const auto layout : {cuda::GdnDecodeLayout::kWholeHead, cuda::GdnDecodeLayout::kSplitColumns}) {
    std::mt19937 rng(741);
    CheckDecode(DecodeCase(k4B, 5, 2, 3, rng, 5, 3), 742, layout);
  }
}

TEST(GatedDeltaNetDecodeTest, SmallOddShapesBothLayouts) {
  // dk 16/24/32/48/100/200, dv != dk and not a multiple of the 32-column split (4, 24, 36, 40, 72,
  // 100; 3- and 4-block clusters), nv:nk 1..4, odd row paddings (unaligned q/k/v/z), a fresh seq.
  const cuda::GdnShape shapes[] = {{2, 4, 16, 24}, {1, 3, 24, 16},   {3, 3, 32, 32}, {2, 8, 16, 32},  {1, 2, 48, 40},
                                   {2, 2, 20, 4},  {1, 1, 200, 100}, {4, 8, 24, 72}, {2, 4, 100, 36}, {1, 4, 32, 128}};
  uint32_t seed = 750;
  for (const cuda::GdnShape& shape : shapes) {
    for (const auto layout :
         {cuda::GdnDecodeLayout::kAuto, cuda::GdnDecodeLayout::kWholeHead, cuda::GdnDecodeLayout::kSplitColumns}) {
      if (layout == cuda::GdnDecodeLayout::kWholeHead && shape.dk > cuda::kGdnDecodeWholeHeadMaxDk) continue;
      std::mt19937 rng(seed);
      CheckDecode(DecodeCase(shape, 7, 3, 2, rng, 5, 3), seed + 1, layout);
    }
    seed += 2;
  }
}

TEST(GatedDeltaNetDecodeTest, ManySmallSeqsBothLayouts) {
  // Enough heads (70 seqs x nv 4) that kAuto picks whole heads on any GPU of <= 280 SMs.
  for (const auto layout : {cuda::GdnDecodeLayout::kAuto, cuda::GdnDecodeLayout::kSplitColumns}) {
    std::mt19937 rng(770);
    CheckDecode(DecodeCase({2, 4, 32, 40}, 70, 4, 33, rng, 3, 1), 771, layout);
  }
}

// kAuto on a decode step (max_seq_tokens == 1, no column state) is the decode kernel: bit for bit
// kDecode's result; and the sequential kernel gives the same to f32 rounding. All three from the
// same inputs; the decode result is also checked against the CPU.
void CheckAutoDecodeSequentialAgree(const cuda::GdnShape& shape, int seqs, uint32_t seed) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  SCOPED_TRACE(fmt::format("{}, {} seqs", ShapeName(shape), seqs));
  std::mt19937 rng(seed);
  const GdnCase gc = DecodeCase(shape, seqs, 2, seqs - 1, rng, 4, 0);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = DecodeInputs(gc, batch.num_tokens, rng);
  GdnDevice auto_d = UploadGdn(gc, in, batch.num_tokens), decode_d = UploadGdn(gc, in, batch.num_tokens),
            seq_d = UploadGdn(gc, in, batch.num_tokens);
  GPU_ASSERT_OK(RunGdn(gc, batch, auto_d, nullptr, cuda::GdnKernel::kAuto));
  GPU_ASSERT_OK(RunGdn(gc, batch, decode_d, nullptr, cuda::GdnKernel::kDecode));
  GPU_ASSERT_OK(RunGdn(gc, batch, seq_d, nullptr, cuda::GdnKernel::kSequential));
  const std::vector<float> auto_state = ToHost(auto_d.state), decode_state = ToHost(decode_d.state),
                           seq_state = ToHost(seq_d.state);
  const std::vector<float> auto_out = HalfToFloat(ToHost(auto_d.out)), decode_out = HalfToFloat(ToHost(decode_d.out)),
                           seq_out = HalfToFloat(ToHost(seq_d.out));
  EXPECT_EQ(CountDiffering(auto_state, 0, decode_state, 0, decode_state.size()), 0)
      << "kAuto's state differs from kDecode's: kAuto did not take the decode kernel";
  EXPECT_EQ(CountDiffering(auto_out, 0, decode_out, 0, decode_out.size()), 0) << "kAuto's out differs from kDecode's";
  EXPECT_CLOSE(decode_state, seq_state, 1e-5, "decode vs sequential state");
  EXPECT_CLOSE(decode_out, seq_out, 2e-3, "decode vs sequential out (f16)");
  CompareGdn(gc, in, CpuGdn(gc, batch, in), decode_d);
}

TEST(GatedDeltaNetDecodeTest, AutoEqualsDecodeAndMatchesSequential) {
  CheckAutoDecodeSequentialAgree(k4B, 8, 781);
  CheckAutoDecodeSequentialAgree(k4B, 2, 782);
  CheckAutoDecodeSequentialAgree({2, 6, 24, 40}, 3, 783);
}

TEST(GatedDeltaNetDecodeTest, LeavesSeqsOfOtherTokenCountsUntouched) {
  // kDecode forced on a step with a 3-token and a 0-token seq: their slots and out rows stay as they
  // were (bit for bit / NaN); the 1-token seqs (one fresh) match the CPU.
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  for (const cuda::GdnShape& shape : {k4B, cuda::GdnShape{2, 4, 24, 40}}) {
    SCOPED_TRACE(ShapeName(shape));
    GdnCase gc{shape, 7, 1,
               0,     0, {{1, 12, 5, false}, {3, 40, 1, false}, {1, 0, 3, false}, {0, 9, 6, false}, {1, 77, 0, false}}};
    std::mt19937 rng(790);
    const StepBatch batch = MakeBatch(gc.seqs);
    const GdnInputs in = DecodeInputs(gc, batch.num_tokens, rng);
    const GdnReference ref = CpuGdn(gc, batch, in);
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr, cuda::GdnKernel::kDecode));
    const std::vector<float> out = HalfToFloat(ToHost(d.out)), state = ToHost(d.state);
    const size_t slot_state = static_cast<size_t>(shape.nv) * shape.dk * shape.dv, row = shape.nv * shape.dv;
    std::vector<bool> used(gc.num_slots, false);
    for (size_t s = 0; s < gc.seqs.size(); ++s) {
      const SeqSpec& sp = gc.seqs[s];
      const cpu::RaggedSeq& rs = batch.seqs[s];
      used[sp.slot] = true;
      if (sp.tokens == 1) {
        EXPECT_CLOSE(Slice(out, static_cast<size_t>(rs.token_begin) * row, row),
                     Slice(ref.out, static_cast<size_t>(rs.token_begin) * row, row), 3e-3,
                     fmt::format("out of decode seq {}", s));
        EXPECT_CLOSE(Slice(state, sp.slot * slot_state, slot_state), ref.states[s], 1e-4,
                     fmt::format("final state of decode seq {}", s));
      } else {
        EXPECT_EQ(CountNotNaN(out, static_cast<size_t>(rs.token_begin) * row, sp.tokens * row), 0)
            << "out rows of seq " << s << " written";
        EXPECT_EQ(CountDiffering(state, sp.slot * slot_state, in.state, sp.slot * slot_state, slot_state), 0)
            << "state of seq " << s << " (" << sp.tokens << " tokens) changed";
      }
    }
    for (int slot = 0; slot < gc.num_slots; ++slot) {
      if (!used[slot]) {
        EXPECT_EQ(CountDiffering(state, slot * slot_state, in.state, slot * slot_state, slot_state), 0)
            << "state of unused slot " << slot;
      }
    }
  }
}

TEST(GatedDeltaNetDecodeTest, RunsInsideCudaGraph) {
  // The cluster launch (dv 72: 3 blocks a head) and the whole-head launch captured and replayed.
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  for (const auto layout : {cuda::GdnDecodeLayout::kSplitColumns, cuda::GdnDecodeLayout::kWholeHead}) {
    SCOPED_TRACE(LayoutName(layout));
    std::mt19937 rng(801);
    const GdnCase gc = DecodeCase({2, 4, 32, 72}, 3, 1, 0, rng);
    const StepBatch batch = MakeBatch(gc.seqs);
    const GdnInputs in = DecodeInputs(gc, batch.num_tokens, rng);
    const GdnReference ref = CpuGdn(gc, batch, in);
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    LaunchInCapturedGraph([&](cudaStream_t stream) {
      return cuda::CudaStatus(
          cuda::LaunchGatedDeltaNetDecode(d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f,
                                          batch.device, layout, d.state.data(), d.out.data(), stream),
          "LaunchGatedDeltaNetDecode");
    });
    if (HasFatalFailure()) return;
    CompareGdn(gc, in, ref, d);
  }
}

TEST(GatedDeltaNetDecodeTest, RejectsColumnState) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const StepBatch batch = MakeBatch({{1, 3, 0, false}});
  DeviceBuffer<float> buf = PoisonedF32(1 << 16);
  DeviceBuffer<__half> out = PoisonedF16(1024);
  float* p = buf.data();
  const cuda::GdnInput in{p, 2 * 2 * 16 + 4 * 24, p, p, 4, p, 4 * 24};
  const absl::Status s = cuda::GatedDeltaNetWith(cuda::GdnKernel::kDecode, in, {2, 4, 16, 24}, p, p, p, 1e-6f,
                                                 batch.device, p, p, 1, out.data(), nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << std::string(s.message());
  EXPECT_NE(std::string(s.message()).find("decode kernel needs column_state == nullptr"), std::string::npos)
      << std::string(s.message());
}

}  // namespace
}  // namespace sparkserve::gpu_test::gdn
