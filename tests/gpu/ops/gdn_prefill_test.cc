// The chunked (prefill) Gated DeltaNet path (kernels/cuda/gdn_chunked_prep.cu + gdn_chunked.cu)
// against the CPU chain of GdnForward on seeded random inputs: the 4B's shape at 4096 tokens in one
// seq and over several seqs of mixed lengths (below 64, not multiples of 64, decode seqs beside),
// ragged steps with long seqs, start_pos 0 (NaN-poisoned slots) and > 0 (a random carried state),
// small odd shapes (nv:nk 1..4, dk != dv, dk 16..128; dk 200 falls back to the sequential kernel),
// state carried across launches equal to one long launch, the routing of a mixed step (every seq
// exactly once, whatever max_seq_tokens claims), the workspace contract (sized exactly by
// GdnWorkspaceBytes, NaN-poisoned before every launch, a NaN canary after it that must stay
// untouched; missing / too small is an error or, for kAuto without one, the sequential kernel), and
// argument errors. Each case runs GatedDeltaNet's own choice (kAuto), the forced kChunked (TF32
// tensor cores), kChunkedSimt (the same kernels with every mma emulated in f32: when only kChunked
// fails, suspect TF32 precision or the hardware fragment layout; when both fail, the indexing),
// kChunkedSmall (kChunked with the recurrence's small staging, the one sm_120 / sm_121 run, forced on
// any GPU; it must also equal kChunked bit for bit: SmallVariantEqualsLarge) and kSequential.
//
// Tolerances (relative to the largest reference value, as every op test): the final state 1e-4 as
// for the sequential kernel (the chunked state path is f32 / 3xTF32); the f16 output 3e-3 for the
// sequential kernel and kTf32OutTolerance for the chunked path, whose output-only operands (q k^T,
// diag(gamma) Q, P) are rounded to 10 mantissa bits (TF32 products, f16 records) in both variants:
// the previous chunked kernel measured up to 3.7e-3 on the H200 (dv 4) and 1.2e-3 at the 4B shape
// with the same rounding. The measured errors are printed; a failure prints where the worst one is.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/gdn_kernels.h"
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
    case GdnKernel::kChunkedSimt: return "chunked (f32 emulated mma)";
    case GdnKernel::kChunkedSmall: return "chunked small (tf32, 99 KB staging)";
    case GdnKernel::kDecode: return "decode";
  }
  return "?";
}

constexpr double kTf32OutTolerance = 5e-3;
constexpr size_t kCanaryFloats = 4096;

constexpr GdnKernel kAllKernels[] = {GdnKernel::kAuto, GdnKernel::kChunked, GdnKernel::kChunkedSimt,
                                     GdnKernel::kChunkedSmall, GdnKernel::kSequential};

// A workspace of exactly GdnWorkspaceBytes(shape, tokens, seqs) bytes, NaN-filled, followed by a NaN
// canary no kernel may write. bytes 0 (a shape the chunked path cannot take): no workspace.
struct Workspace {
  DeviceBuffer<float> buf;
  size_t bytes = 0;
  cuda::GdnWorkspace view() { return {bytes > 0 ? buf.data() : nullptr, bytes}; }
};

Workspace MakeWorkspace(const cuda::GdnShape& shape, int tokens, int seqs) {
  Workspace w;
  w.bytes = cuda::GdnWorkspaceBytes(shape, tokens, seqs);
  EXPECT_EQ(w.bytes % 4, 0u);
  auto b = DeviceBuffer<float>::Allocate(w.bytes / 4 + kCanaryFloats);
  EXPECT_TRUE(b.ok()) << std::string(b.status().message());
  w.buf = std::move(b).value();
  EXPECT_EQ(cudaMemset(w.buf.data(), 0xff, w.buf.bytes()), cudaSuccess);  // 0xffffffff is a NaN
  return w;
}

void ExpectCanaryUntouched(const Workspace& w) {
  std::vector<float> tail(kCanaryFloats);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(tail.data(), w.buf.data() + w.bytes / 4, kCanaryFloats * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(CountNotNaN(tail, 0, kCanaryFloats), 0) << "written past the workspace's " << w.bytes << " bytes";
}

// GatedDeltaNetWith with the workspace; columns as RunGdn passes them (kept columns, or kSequential).
absl::Status RunWith(const GdnCase& gc, const StepBatch& batch, GdnDevice& d, GdnKernel kernel,
                 const cuda::GdnWorkspace& ws) {
  const bool columns = AnyKeep(gc.seqs) || kernel == GdnKernel::kSequential;
  return cuda::GatedDeltaNetWith(kernel, d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f,
                                 batch.device, d.state.data(), columns ? d.columns.data() : nullptr, gc.max_columns,
                                 d.out.data(), nullptr, ws);
}

// Where the largest output error is: seq, token, head, column, got, want.
std::string WorstOut(const GdnCase& gc, const StepBatch& batch, const std::vector<float>& got,
                     const std::vector<float>& want) {
  const int nv = gc.shape.nv, dv = gc.shape.dv;
  size_t worst = 0;
  double err = -1;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::abs(double(got[i]) - want[i]) : INFINITY;
    if (e > err) {
      err = e;
      worst = i;
    }
  }
  const int tok = static_cast<int>(worst / (static_cast<size_t>(nv) * dv));
  const int head = static_cast<int>(worst / dv % nv), col = static_cast<int>(worst % dv);
  int seq = 0;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    if (tok >= batch.seqs[s].token_begin) seq = static_cast<int>(s);
  }
  return fmt::format("worst out: seq {} (of {} tokens, start_pos {}) token {} (chunk {} row {}) head {} column {}: "
                     "got {} want {}", seq, gc.seqs[seq].tokens, gc.seqs[seq].start_pos,
                     tok - batch.seqs[seq].token_begin, (tok - batch.seqs[seq].token_begin) / 64,
                     (tok - batch.seqs[seq].token_begin) % 64, head, col, got[worst], want[worst]);
}

// Worst state element of seq s: head, row, column.
std::string WorstState(const GdnCase& gc, size_t s, const std::vector<float>& got, const std::vector<float>& want) {
  const int dk = gc.shape.dk, dv = gc.shape.dv;
  size_t worst = 0;
  double err = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::abs(double(got[i]) - want[i]) : INFINITY;
    if (e > err) {
      err = e;
      worst = i;
    }
  }
  return fmt::format("worst state of seq {} (slot {}): head {} row {} column {}: got {} want {}", s, gc.seqs[s].slot,
                     worst / (static_cast<size_t>(dk) * dv), worst / dv % dk, worst % dv, got[worst], want[worst]);
}

// Compares as CompareGdn, prints the errors, and on a failure where the worst elements are.
void CompareAndPrint(const std::string& what, const GdnCase& gc, const StepBatch& batch, const GdnInputs& in,
                     const GdnReference& ref, const GdnDevice& d, double out_tol) {
  CompareGdn(gc, in, ref, d, out_tol);
  const auto [nk, nv, dk, dv] = gc.shape;
  const size_t slot_state = static_cast<size_t>(nv) * dk * dv;
  const std::vector<float> out = HalfToFloat(ToHost(d.out));
  const std::vector<float> state = ToHost(d.state);
  const double out_err = RelativeError(out, ref.out);
  double state_err = 0;
  for (size_t s = 0; s < gc.seqs.size(); ++s) {
    const std::vector<float> got = Slice(state, gc.seqs[s].slot * slot_state, slot_state);
    const double e = RelativeError(got, ref.states[s]);
    if (e > 1e-4) ADD_FAILURE() << what << ": " << WorstState(gc, s, got, ref.states[s]);
    state_err = std::max(state_err, e);
  }
  if (out_err > out_tol) ADD_FAILURE() << what << ": " << WorstOut(gc, batch, out, ref.out);
  std::printf("[gdn prefill] %-70s out %.2e state %.2e\n", what.c_str(), out_err, state_err);
}

double OutTolerance(GdnKernel k) { return k == GdnKernel::kSequential ? 3e-3 : kTf32OutTolerance; }

// Runs `kernel` on fresh (poisoned) buffers and workspace and compares with the CPU.
void CheckKernel(const GdnCase& gc, const StepBatch& batch, const GdnInputs& in, const GdnReference& ref,
                 GdnKernel kernel, const std::string& label) {
  const std::string what = fmt::format("{} [{}]", label, Name(kernel));
  SCOPED_TRACE(what);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  Workspace ws = MakeWorkspace(gc.shape, batch.num_tokens, static_cast<int>(gc.seqs.size()));
  GPU_ASSERT_OK(RunWith(gc, batch, d, kernel, ws.view()));
  CompareAndPrint(what, gc, batch, in, ref, d, OutTolerance(kernel));
  if (ws.bytes > 0) ExpectCanaryUntouched(ws);
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

TEST(GatedDeltaNetPrefillTest, Shape4BOneSeq4096) {
  // The TTFT case: one fresh 4096-token prompt at the 4B's shape (64 full chunks).
  GdnCase gc{k4B, 3, 1, 0, 0, {{4096, 0, 1, false}}};
  CheckAllKernels(gc, 700, "4B, one seq of 4096");
}

TEST(GatedDeltaNetPrefillTest, Shape4BSeveralSeqs) {
  // Several seqs of one step: long ones fresh and continued (random carried state), lengths below,
  // at and past the chunk, around the 16-token routing threshold, a decode seq; slots out of order.
  GdnCase gc{k4B, 14, 1, 0, 0, {}};
  gc.seqs = {{1024, 0, 7, false}, {1000, 77, 2, false}, {63, 5, 11, false}, {64, 0, 0, false},
             {65, 64, 13, false}, {1, 40, 4, false},   {130, 0, 9, false}, {16, 9, 1, false},
             {15, 0, 12, false},  {200, 1, 5, false},  {37, 0, 3, false},  {512, 300, 8, false}};
  CheckAllKernels(gc, 703, "4B, 12 seqs of mixed lengths");
}

TEST(GatedDeltaNetPrefillTest, EqualSplits) {
  // 8 x 512 and 4 x 1024 (the timing table's splits) at a mid-size shape, alternating fresh and
  // carried seqs.
  for (const int seqs : {8, 4}) {
    GdnCase gc{{2, 4, 64, 64}, seqs + 1, 1, 0, 0, {}};
    for (int s = 0; s < seqs; ++s) gc.seqs.push_back({4096 / seqs, s % 2 == 0 ? 0 : 100 * s, seqs - s, false});
    CheckAllKernels(gc, 704 + static_cast<uint32_t>(seqs), fmt::format("{} x {}", seqs, 4096 / seqs));
  }
}

TEST(GatedDeltaNetPrefillTest, RaggedLongSeqs) {
  // Lengths around the chunk (63, 64, 65) and the routing threshold (15, 16), long seqs (300, 1000,
  // 4096) fresh and continued, decode seqs beside them; slots out of order, one slot unused.
  GdnCase gc{{2, 4, 32, 32}, 11, 1, 3, 5, {}};
  gc.seqs = {{1, 0, 4, false},   {63, 0, 0, false},  {64, 17, 9, false}, {65, 0, 2, false},
             {300, 129, 7, false}, {1, 55, 1, false}, {1000, 0, 5, false}, {4096, 5, 3, false},
             {15, 3, 8, false},  {16, 0, 10, false}};
  CheckAllKernels(gc, 701, "ragged long seqs");
}

TEST(GatedDeltaNetPrefillTest, Shape4BShortSeqs) {
  // The 4B's shape: a fresh prefill chunk, a continued one, decode seqs, short chunks.
  GdnCase gc{k4B, 6, 1, 8, 12, {}};
  gc.seqs = {{200, 0, 3, false}, {1, 40, 0, false}, {65, 64, 5, false}, {1, 0, 1, false}, {20, 7, 4, false}};
  CheckAllKernels(gc, 702, "4B shape, short seqs");
}

TEST(GatedDeltaNetPrefillTest, SmallOddShapes) {
  // dk / dv not multiples of the 16-row / 32-column tiles, nv:nk 1..4, dv != dk, dk up to the
  // chunked path's 128 (odd dk: the q/k rows are not 16-byte aligned, so 4-byte copies); dk 200 is
  // past it (no workspace: kAuto falls back to the sequential kernel; the forced chunked kernels are
  // refused: checked in RejectsBadArguments).
  const cuda::GdnShape shapes[] = {{2, 4, 16, 24}, {1, 3, 24, 16}, {3, 3, 32, 32}, {2, 8, 16, 32},
                                   {1, 2, 48, 40}, {2, 2, 20, 4},  {1, 4, 128, 64}, {1, 2, 40, 128},
                                   {1, 1, 9, 12}};
  uint32_t seed = 710;
  for (const cuda::GdnShape& shape : shapes) {
    GdnCase gc{shape, 6, 1, 5, 3, {}};
    gc.seqs = {{70, 0, 5, false}, {1, 9, 2, false}, {130, 33, 0, false}, {16, 0, 3, false}, {15, 2, 1, false}};
    CheckAllKernels(gc, seed++, fmt::format("nk {} nv {} dk {} dv {}", shape.nk, shape.nv, shape.dk, shape.dv));
  }
  GdnCase big_dk{{1, 1, 200, 100}, 3, 1, 0, 0, {{90, 0, 2, false}, {1, 5, 0, false}}};
  EXPECT_EQ(cuda::GdnWorkspaceBytes(big_dk.shape, 91, 2), 0u) << "dk 200 is past the chunked path";
  std::mt19937 rng(720);
  const StepBatch batch = MakeBatch(big_dk.seqs);
  const GdnInputs in = MakeGdnInputs(big_dk, batch.num_tokens, rng);
  CheckKernel(big_dk, batch, in, CpuGdn(big_dk, batch, in), GdnKernel::kAuto, "dk 200 (sequential fallback)");
}

// One seq of 300 tokens run as two launches (split tokens, then the rest with start_pos = split,
// reading the state the first left) against one launch of all 300 and against the CPU. One
// workspace serves all three launches (what the first left in it must not matter).
TEST(GatedDeltaNetPrefillTest, CarriedStateEqualsOneLongLaunch) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const GdnCase whole{{2, 4, 64, 48}, 2, 1, 0, 0, {{300, 0, 1, false}}};
  std::mt19937 rng(730);
  const StepBatch batch = MakeBatch(whole.seqs);
  const GdnInputs in = MakeGdnInputs(whole, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(whole, batch, in);
  Workspace ws = MakeWorkspace(whole.shape, 300, 1);
  GdnDevice one = UploadGdn(whole, in, batch.num_tokens);
  GPU_ASSERT_OK(RunWith(whole, batch, one, GdnKernel::kAuto, ws.view()));
  CompareGdn(whole, in, ref, one, kTf32OutTolerance);
  const std::vector<float> one_out = HalfToFloat(ToHost(one.out)), one_state = ToHost(one.state);
  const size_t slot_state = 4ull * 64 * 48;

  // Split 1: the first token goes to the sequential kernel, the rest to the chunked path (kAuto);
  // 64: exactly one chunk first; 130: chunks not aligned with the first launch's. kChunkedSmall: both
  // launches on the small staging (the 1-token launch too).
  for (const GdnKernel kernel : {GdnKernel::kAuto, GdnKernel::kChunkedSmall}) {
    for (const int split : {1, 64, 130}) {
      SCOPED_TRACE(fmt::format("{}: split at {}", Name(kernel), split));
      GdnDevice two = UploadGdn(whole, in, batch.num_tokens);
      const StepBatch first = MakeBatch({{split, 0, 1, false}});
      GPU_ASSERT_OK(RunWith(whole, first, two, kernel, ws.view()));
      // The second launch reads rows split..299 of the same step buffers: token_begin {split, 300}.
      StepBatch second = MakeBatch({{300 - split, split, 1, false}});
      second.token_begin = ToDevice(std::vector<int32_t>{split, 300});
      second.device.token_begin = second.token_begin.data();
      GPU_ASSERT_OK(RunWith(whole, second, two, kernel, ws.view()));
      CompareGdn(whole, in, ref, two, kTf32OutTolerance);
      EXPECT_CLOSE(HalfToFloat(ToHost(two.out)), one_out, 3e-3, "two launches vs one: out");
      EXPECT_CLOSE(Slice(ToHost(two.state), slot_state, slot_state), Slice(one_state, slot_state, slot_state), 1e-4,
                   "two launches vs one: final state");
    }
  }
  ExpectCanaryUntouched(ws);
}

// A mixed step under kAuto: one long prefill seq among decode seqs and short chunks. Whatever
// max_seq_tokens claims (exact, overstated, understated down to 2), each seq must be processed
// exactly once: twice would advance its state twice, never would leave its NaN-poisoned output.
// (A claim of 1 is trusted: it sends the whole step to the decode kernel, which takes 1-token seqs
// only; GatedDeltaNetDecodeTest covers that contract.)
TEST(GatedDeltaNetPrefillTest, MixedStepTakesEverySeqOnce) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  GdnCase gc{{2, 6, 32, 64}, 12, 1, 0, 0, {}};
  gc.seqs.push_back({700, 0, 0, false});
  for (int s = 1; s < 10; ++s) gc.seqs.push_back({s % 3 == 0 ? 16 + s : 1, 10 * s, s, false});
  std::mt19937 rng(740);
  const StepBatch exact = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, exact.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, exact, in);
  for (const int claimed : {700, 8192, 8, 2}) {
    SCOPED_TRACE(fmt::format("max_seq_tokens {} (actual 700)", claimed));
    StepBatch batch = MakeBatch(gc.seqs);
    batch.device.max_seq_tokens = claimed;
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    Workspace ws = MakeWorkspace(gc.shape, batch.num_tokens, static_cast<int>(gc.seqs.size()));
    GPU_ASSERT_OK(RunWith(gc, batch, d, GdnKernel::kAuto, ws.view()));
    CompareGdn(gc, in, ref, d, claimed >= 16 ? kTf32OutTolerance : 3e-3);  // < 16: all sequential
    ExpectCanaryUntouched(ws);
    // Forced small staging: every seq (1-token ones too) by the chunked path, once, whatever the claim.
    GdnDevice small = UploadGdn(gc, in, batch.num_tokens);
    GPU_ASSERT_OK(RunWith(gc, batch, small, GdnKernel::kChunkedSmall, ws.view()));
    CompareGdn(gc, in, ref, small, kTf32OutTolerance);
    ExpectCanaryUntouched(ws);
  }
}

// The workspace contract: kAuto without one is the sequential kernel (right results); kChunked
// without one, or any chunked launch with one too small or misaligned, is an InvalidArgument naming
// it; the size grows with the step.
TEST(GatedDeltaNetPrefillTest, WorkspaceContract) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const GdnCase gc{{2, 4, 32, 32}, 3, 1, 0, 0, {{200, 0, 0, false}, {90, 12, 2, false}}};
  std::mt19937 rng(750);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  {
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    GPU_ASSERT_OK(RunWith(gc, batch, d, GdnKernel::kAuto, {}));
    CompareAndPrint("auto without a workspace (sequential)", gc, batch, in, ref, d, 3e-3);
  }
  auto invalid = [&](absl::Status s, const char* needle) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << std::string(s.message());
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << std::string(s.message());
  };
  const size_t need = cuda::GdnWorkspaceBytes(gc.shape, batch.num_tokens, 2);
  ASSERT_GT(need, 0u) << "the chunked path must be available on this GPU";
  EXPECT_GT(cuda::GdnWorkspaceBytes(gc.shape, batch.num_tokens + 64, 2), need);
  EXPECT_GT(cuda::GdnWorkspaceBytes(gc.shape, batch.num_tokens, 3), need);
  Workspace ws = MakeWorkspace(gc.shape, batch.num_tokens, 2);
  for (const GdnKernel k :
       {GdnKernel::kChunked, GdnKernel::kChunkedSimt, GdnKernel::kChunkedSmall, GdnKernel::kAuto}) {
    SCOPED_TRACE(Name(k));
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    if (k != GdnKernel::kAuto) invalid(RunWith(gc, batch, d, k, {}), "needs a workspace");
    invalid(RunWith(gc, batch, d, k, {ws.buf.data(), need - 16}), "workspace");
    invalid(RunWith(gc, batch, d, k, {reinterpret_cast<uint8_t*>(ws.buf.data()) + 4, need}), "16-byte aligned");
    GPU_ASSERT_OK(RunWith(gc, batch, d, k, ws.view()));  // the refused calls left nothing behind
    CompareGdn(gc, in, ref, d, kTf32OutTolerance);
  }
  ExpectCanaryUntouched(ws);
}

TEST(GatedDeltaNetPrefillTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const StepBatch batch = MakeBatch({{70, 0, 0, false}});
  DeviceBuffer<float> buf = PoisonedF32(1 << 16);
  DeviceBuffer<__half> out = PoisonedF16(1024);
  float* p = buf.data();
  const cuda::GdnWorkspace ws{p, buf.bytes()};
  auto invalid = [&](absl::Status s, const char* needle) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << std::string(s.message());
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << std::string(s.message());
  };
  const cuda::GdnInput small{p, 2 * 2 * 16 + 4 * 24, p, p, 4, p, 4 * 24};
  for (const GdnKernel k : {GdnKernel::kChunked, GdnKernel::kChunkedSimt, GdnKernel::kChunkedSmall}) {
    SCOPED_TRACE(Name(k));
    invalid(cuda::GatedDeltaNetWith(k, small, {2, 4, 16, 24}, p, p, p, 1e-6f, batch.device, p, p, 1, out.data(),
                                    nullptr, ws),
            "column_state == nullptr");
    const cuda::GdnInput wide{p, 2 * 200 + 100, p, p, 1, p, 100};
    invalid(cuda::GatedDeltaNetWith(k, wide, {1, 1, 200, 100}, p, p, p, 1e-6f, batch.device, p, nullptr, 0,
                                    out.data(), nullptr, ws),
            "dk <= 128");
  }
  // The shared checks apply to every kernel choice.
  invalid(cuda::GatedDeltaNetWith(GdnKernel::kChunked, small, {2, 4, 16, 22}, p, p, p, 1e-6f, batch.device, p,
                                  nullptr, 0, out.data(), nullptr, ws),
          "dv = 22");
}

// The small staging (sm_120 / sm_121's) fits their 99 KB for every shape the chunked path takes, and
// where the large one runs (kChunked on the H200) the two give the same bits: they add the same
// products in the same order, so any difference is a staging bug (a piece copied wrong or read
// before it landed). Each run is also checked against the CPU.
TEST(GatedDeltaNetPrefillTest, SmallVariantEqualsLarge) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  using cuda::GdnChunkedVariant;
  for (const int dk : {16, 24, 48, 64, 100, 128}) {
    for (const int dv : {4, 40, 128}) {
      EXPECT_LE(cuda::GdnChunkedSmemBytes(dk, dv, GdnChunkedVariant::kSmall), size_t{cuda::kGdnSmallSharedMemory})
          << "dk " << dk << " dv " << dv;
    }
  }
  EXPECT_GT(cuda::GdnChunkedSmemBytes(128, 128, GdnChunkedVariant::kLarge), size_t{cuda::kGdnSmallSharedMemory})
      << "the large staging fits 99 KB at the 4B's shape: kAuto on sm_120 could take it";
  const auto picked = cuda::GdnChunkedVariantFor(128, 128);
  ASSERT_TRUE(picked.has_value()) << "no chunked variant fits this GPU";
  std::printf("[gdn prefill] kChunked runs the %s staging here (small: %zu bytes a block, large: %zu)\n",
              *picked == GdnChunkedVariant::kLarge ? "large" : "small",
              cuda::GdnChunkedSmemBytes(128, 128, GdnChunkedVariant::kSmall),
              cuda::GdnChunkedSmemBytes(128, 128, GdnChunkedVariant::kLarge));

  struct Case {
    GdnCase gc;
    uint32_t seed;
    const char* label;
  };
  const Case cases[] = {
      {{k4B, 4, 1, 0, 0, {{200, 50, 2, false}, {1, 9, 0, false}, {130, 0, 3, false}}}, 760, "4B, 200 / 1 / 130"},
      {{{1, 2, 48, 40}, 4, 1, 3, 5, {{300, 0, 1, false}, {17, 4, 3, false}, {65, 64, 0, false}}}, 761, "dk 48 dv 40"},
      {{{3, 3, 24, 16}, 3, 1, 1, 0, {{129, 7, 2, false}, {64, 0, 0, false}}}, 762, "dk 24 dv 16 (4-byte loads)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    std::mt19937 rng(c.seed);
    const StepBatch batch = MakeBatch(c.gc.seqs);
    const GdnInputs in = MakeGdnInputs(c.gc, batch.num_tokens, rng);
    const GdnReference ref = CpuGdn(c.gc, batch, in);
    Workspace ws = MakeWorkspace(c.gc.shape, batch.num_tokens, static_cast<int>(c.gc.seqs.size()));
    GdnDevice large = UploadGdn(c.gc, in, batch.num_tokens), small = UploadGdn(c.gc, in, batch.num_tokens);
    GPU_ASSERT_OK(RunWith(c.gc, batch, large, GdnKernel::kChunked, ws.view()));
    GPU_ASSERT_OK(RunWith(c.gc, batch, small, GdnKernel::kChunkedSmall, ws.view()));
    CompareAndPrint(fmt::format("{} [{}]", c.label, Name(GdnKernel::kChunked)), c.gc, batch, in, ref, large,
                    kTf32OutTolerance);
    CompareAndPrint(fmt::format("{} [{}]", c.label, Name(GdnKernel::kChunkedSmall)), c.gc, batch, in, ref, small,
                    kTf32OutTolerance);
    const std::vector<float> out_l = HalfToFloat(ToHost(large.out)), out_s = HalfToFloat(ToHost(small.out));
    const std::vector<float> state_l = ToHost(large.state), state_s = ToHost(small.state);
    EXPECT_EQ(CountDiffering(out_s, 0, out_l, 0, out_l.size()), 0) << "out: small staging != large";
    EXPECT_EQ(CountDiffering(state_s, 0, state_l, 0, state_l.size()), 0) << "state: small staging != large";
    ExpectCanaryUntouched(ws);
  }
}

// Prefill steps may be captured too: the chunked launches (both stagings, and kAuto's mix with the
// sequential kernel) capture and replay to the CPU's results.
TEST(GatedDeltaNetPrefillTest, ChunkedRunsInsideCudaGraph) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const GdnCase gc{{2, 4, 32, 32}, 4, 1, 0, 0, {{130, 20, 1, false}, {1, 3, 0, false}, {64, 0, 2, false}}};
  std::mt19937 rng(770);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  for (const GdnKernel k : {GdnKernel::kAuto, GdnKernel::kChunked, GdnKernel::kChunkedSmall}) {
    SCOPED_TRACE(Name(k));
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    Workspace ws = MakeWorkspace(gc.shape, batch.num_tokens, static_cast<int>(gc.seqs.size()));
    LaunchInCapturedGraph([&](cudaStream_t stream) {
      return cuda::GatedDeltaNetWith(k, d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f,
                                     batch.device, d.state.data(), nullptr, 0, d.out.data(), stream, ws.view());
    });
    if (HasFatalFailure()) return;
    CompareAndPrint(fmt::format("graph-captured [{}]", Name(k)), gc, batch, in, ref, d, kTf32OutTolerance);
    ExpectCanaryUntouched(ws);
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test::gdn
