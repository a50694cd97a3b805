// The chunked (prefill) Gated DeltaNet kernel (kernels/cuda/gdn_chunked.cu) against the CPU chain
// of GdnForward on seeded random inputs: ragged steps with long seqs (1..4096 tokens, lengths around
// the 64-token chunk and the 16-token routing threshold), start_pos 0 (NaN-poisoned slots) and > 0,
// the 4B's shape and small odd ones (nv:nk 1..4, dk != dv, dk 16..128, dk 200 falling back to the
// sequential kernel), state carried across launches equal to one long launch, the routing of a mixed
// step (every seq exactly once, whatever max_seq_tokens claims), and argument errors. Each case runs
// GatedDeltaNet's own choice (kAuto) and the forced kernels: kChunked (TF32 tensor cores),
// kChunkedSimt (f32 FMA tiles: when only kChunked fails, suspect the mma fragment mapping) and
// kSequential.
//
// Tolerances (relative to the largest reference value, as every op test): the final state 1e-4 as
// for the sequential kernel (the chunked state path is 3xTF32, ~f32; the chunk sums reorder f32
// rounding, ~1e-6), the f16 output 3e-3 as before for the f32 kernels (f16 rounding 4.9e-4), and
// kTf32OutTolerance where plain TF32 (10-bit mantissa) feeds the output-only products (q k^T, Q S
// and the intra-chunk attention: 64-term sums of TF32 products): the H200 measured up to 3.7e-3
// (dv 4) and 1.2e-3 at the 4B shape. The measured errors are printed.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cuda/gdn.h"
#include "tests/gpu/ops/gdn_reference.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {
namespace {

using cuda::GdnKernel;

const char* Name(GdnKernel k) {
  switch (k) {
    case GdnKernel::kAuto: return "auto";
    case GdnKernel::kSequential: return "sequential";
    case GdnKernel::kChunked: return "chunked (tf32)";
    case GdnKernel::kChunkedSimt: return "chunked (f32 simt)";
    case GdnKernel::kDecode: return "decode";
  }
  return "?";
}

constexpr double kTf32OutTolerance = 5e-3;

constexpr GdnKernel kAllKernels[] = {GdnKernel::kAuto, GdnKernel::kChunked, GdnKernel::kChunkedSimt,
                                     GdnKernel::kSequential};

// Prints the largest relative errors of out and of the final states (the lead reads the margins).
void PrintErrors(const std::string& what, const GdnCase& gc, const GdnReference& ref, const GdnDevice& d) {
  const auto [nk, nv, dk, dv] = gc.shape;
  const size_t slot_state = static_cast<size_t>(nv) * dk * dv;
  const double out_err = RelativeError(HalfToFloat(ToHost(d.out)), ref.out);
  const std::vector<float> state = ToHost(d.state);
  double state_err = 0;
  for (size_t s = 0; s < gc.seqs.size(); ++s) {
    state_err = std::max(state_err, RelativeError(Slice(state, gc.seqs[s].slot * slot_state, slot_state), ref.states[s]));
  }
  std::printf("[gdn prefill] %-60s out %.2e state %.2e\n", what.c_str(), out_err, state_err);
}

// Runs `kernel` on fresh buffers and compares with the CPU.
void CheckKernel(const GdnCase& gc, const StepBatch& batch, const GdnInputs& in, const GdnReference& ref,
                 GdnKernel kernel, const std::string& label) {
  SCOPED_TRACE(fmt::format("{}, kernel {}", label, Name(kernel)));
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr, kernel));
  // kAuto takes the TF32 chunked kernel for seqs past kGdnChunkedMinTokens.
  const bool tf32 = kernel == GdnKernel::kChunked || kernel == GdnKernel::kAuto;
  CompareGdn(gc, in, ref, d, tf32 ? kTf32OutTolerance : 3e-3);
  PrintErrors(fmt::format("{} [{}]", label, Name(kernel)), gc, ref, d);
}

void CheckAllKernels(const GdnCase& gc, uint32_t seed, const std::string& label) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(seed);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  for (const GdnKernel kernel : kAllKernels) CheckKernel(gc, batch, in, ref, kernel, label);
}

constexpr cuda::GdnShape k4B{16, 32, 128, 128};

TEST(GatedDeltaNetPrefillTest, RaggedLongSeqs) {
  // Lengths around the chunk (63, 64, 65) and the routing threshold (15, 16), long seqs (300, 1000,
  // 4096) fresh and continued, decode seqs beside them; slots out of order, one slot unused.
  GdnCase gc{{2, 4, 32, 32}, 11, 1, 3, 5, {}};
  gc.seqs = {{1, 0, 4, false},   {63, 0, 0, false},  {64, 17, 9, false}, {65, 0, 2, false},
             {300, 129, 7, false}, {1, 55, 1, false}, {1000, 0, 5, false}, {4096, 5, 3, false},
             {15, 3, 8, false},  {16, 0, 10, false}};
  CheckAllKernels(gc, 701, "ragged long seqs");
}

TEST(GatedDeltaNetPrefillTest, Shape4B) {
  // The 4B's shape: a fresh prefill chunk, a continued one, decode seqs, short chunks.
  GdnCase gc{k4B, 6, 1, 8, 12, {}};
  gc.seqs = {{200, 0, 3, false}, {1, 40, 0, false}, {65, 64, 5, false}, {1, 0, 1, false}, {20, 7, 4, false}};
  CheckAllKernels(gc, 702, "4B shape");
}

TEST(GatedDeltaNetPrefillTest, SmallOddShapes) {
  // dk / dv not multiples of the 16-row / 32-column tiles, nv:nk 1..4, dv != dk, dk up to the
  // chunked kernel's 128; dk 200 is past it (kAuto falls back to the sequential kernel, the forced
  // chunked kernels are refused: checked in RejectsBadArguments).
  const cuda::GdnShape shapes[] = {{2, 4, 16, 24}, {1, 3, 24, 16}, {3, 3, 32, 32}, {2, 8, 16, 32},
                                   {1, 2, 48, 40}, {2, 2, 20, 4},  {1, 4, 128, 64}, {1, 2, 40, 128}};
  uint32_t seed = 710;
  for (const cuda::GdnShape& shape : shapes) {
    GdnCase gc{shape, 6, 1, 5, 3, {}};
    gc.seqs = {{70, 0, 5, false}, {1, 9, 2, false}, {130, 33, 0, false}, {16, 0, 3, false}, {15, 2, 1, false}};
    CheckAllKernels(gc, seed++, fmt::format("nk {} nv {} dk {} dv {}", shape.nk, shape.nv, shape.dk, shape.dv));
  }
  GdnCase big_dk{{1, 1, 200, 100}, 3, 1, 0, 0, {{90, 0, 2, false}, {1, 5, 0, false}}};
  std::mt19937 rng(720);
  const StepBatch batch = MakeBatch(big_dk.seqs);
  const GdnInputs in = MakeGdnInputs(big_dk, batch.num_tokens, rng);
  CheckKernel(big_dk, batch, in, CpuGdn(big_dk, batch, in), GdnKernel::kAuto, "dk 200 (sequential fallback)");
}

// One seq of 300 tokens run as two launches (split tokens, then the rest with start_pos = split,
// reading the state the first left) against one launch of all 300 and against the CPU.
TEST(GatedDeltaNetPrefillTest, CarriedStateEqualsOneLongLaunch) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const GdnCase whole{{2, 4, 64, 48}, 2, 1, 0, 0, {{300, 0, 1, false}}};
  std::mt19937 rng(730);
  const StepBatch batch = MakeBatch(whole.seqs);
  const GdnInputs in = MakeGdnInputs(whole, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(whole, batch, in);
  GdnDevice one = UploadGdn(whole, in, batch.num_tokens);
  GPU_ASSERT_OK(RunGdn(whole, batch, one, nullptr, GdnKernel::kAuto));
  CompareGdn(whole, in, ref, one);
  const std::vector<float> one_out = HalfToFloat(ToHost(one.out)), one_state = ToHost(one.state);
  const size_t slot_state = 4ull * 64 * 48;

  // Split 1: the first token goes to the sequential kernel, the rest to the chunked one (kAuto);
  // 64: exactly one chunk first; 130: chunks not aligned with the first launch's.
  for (const int split : {1, 64, 130}) {
    SCOPED_TRACE(fmt::format("split at {}", split));
    GdnDevice two = UploadGdn(whole, in, batch.num_tokens);
    const StepBatch first = MakeBatch({{split, 0, 1, false}});
    GPU_ASSERT_OK(RunGdn(whole, first, two, nullptr, GdnKernel::kAuto));
    // The second launch reads rows split..299 of the same step buffers: token_begin {split, 300}.
    StepBatch second = MakeBatch({{300 - split, split, 1, false}});
    second.token_begin = ToDevice(std::vector<int32_t>{split, 300});
    second.device.token_begin = second.token_begin.data();
    GPU_ASSERT_OK(RunGdn(whole, second, two, nullptr, GdnKernel::kAuto));
    CompareGdn(whole, in, ref, two);
    EXPECT_CLOSE(HalfToFloat(ToHost(two.out)), one_out, 3e-3, "two launches vs one: out");
    EXPECT_CLOSE(Slice(ToHost(two.state), slot_state, slot_state), Slice(one_state, slot_state, slot_state), 1e-4,
                 "two launches vs one: final state");
    PrintErrors(fmt::format("carried state, split at {}", split), whole, ref, two);
  }
}

// A mixed step under kAuto: one long prefill seq among decode seqs and short chunks. Whatever
// max_seq_tokens claims (exact, overstated, understated), each seq must be processed exactly once:
// twice would advance its state twice, never would leave its NaN-poisoned output.
TEST(GatedDeltaNetPrefillTest, MixedStepTakesEverySeqOnce) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  GdnCase gc{{2, 6, 32, 64}, 12, 1, 0, 0, {}};
  gc.seqs.push_back({700, 0, 0, false});
  for (int s = 1; s < 10; ++s) gc.seqs.push_back({s % 3 == 0 ? 16 + s : 1, 10 * s, s, false});
  std::mt19937 rng(740);
  const StepBatch exact = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, exact.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, exact, in);
  for (const int claimed : {700, 8192, 8, 1}) {
    SCOPED_TRACE(fmt::format("max_seq_tokens {} (actual 700)", claimed));
    StepBatch batch = MakeBatch(gc.seqs);
    batch.device.max_seq_tokens = claimed;
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr, GdnKernel::kAuto));
    CompareGdn(gc, in, ref, d);
  }
}

TEST(GatedDeltaNetPrefillTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const StepBatch batch = MakeBatch({{70, 0, 0, false}});
  DeviceBuffer<float> buf = PoisonedF32(1 << 16);
  DeviceBuffer<__half> out = PoisonedF16(1024);
  float* p = buf.data();
  auto invalid = [&](absl::Status s, const char* needle) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << std::string(s.message());
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << std::string(s.message());
  };
  const cuda::GdnInput small{p, 2 * 2 * 16 + 4 * 24, p, p, 4, p, 4 * 24};
  for (const GdnKernel k : {GdnKernel::kChunked, GdnKernel::kChunkedSimt}) {
    invalid(cuda::GatedDeltaNetWith(k, small, {2, 4, 16, 24}, p, p, p, 1e-6f, batch.device, p, p, 1, out.data(),
                                    nullptr),
            "column_state == nullptr");
    const cuda::GdnInput wide{p, 2 * 200 + 100, p, p, 1, p, 100};
    invalid(cuda::GatedDeltaNetWith(k, wide, {1, 1, 200, 100}, p, p, p, 1e-6f, batch.device, p, nullptr, 0,
                                    out.data(), nullptr),
            "dk <= 128");
  }
  // The shared checks apply to every kernel choice.
  invalid(cuda::GatedDeltaNetWith(GdnKernel::kChunked, small, {2, 4, 16, 22}, p, p, p, 1e-6f, batch.device, p,
                                  nullptr, 0, out.data(), nullptr),
          "dv = 22");
}

}  // namespace
}  // namespace sparkserve::gpu_test::gdn
