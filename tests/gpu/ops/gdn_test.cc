// GPU GatedDeltaNet (kernels/cuda/gdn.h) against the CPU chain of model/cpu_layers.cc GdnForward
// (norm.cc L2NormalizeRows + GatedRmsNorm, activation.cc GdnGates, gated_delta.cc) on seeded random
// inputs: 4B decode batches, ragged prefill + decode mixes whose fresh seqs (start_pos 0) have
// NaN-poisoned slots, MTP-verify columns, small odd shapes, graph capture, argument errors, and a
// decode timing at the 4B's shapes (conv + recurrence). The conv's own tests: gdn_conv_test.cc.
#include "kernels/cuda/gdn.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "tests/gpu/ops/gdn_reference.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {
namespace {

void CheckGdn(const GdnCase& gc, uint32_t seed) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(seed);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr));
  CompareGdn(gc, in, ref, d);
}

constexpr cuda::GdnShape k4B{16, 32, 128, 128};

TEST(GatedDeltaNetTest, DecodeBatch4B) {
  GdnCase gc{k4B, 7, 1, 0, 0, {}};
  const int slots[] = {6, 1, 4, 2, 0};
  for (int i = 0; i < 5; ++i) gc.seqs.push_back({1, 3 + 57 * i, slots[i], false});
  CheckGdn(gc, 201);
}

TEST(GatedDeltaNetTest, RaggedPrefillDecodeMix4B) {
  // A fresh prefill chunk (poisoned slot), a continued chunk, decodes, and a fresh single token;
  // mixed and z rows carry padding.
  GdnCase gc{k4B, 6, 1, 8, 12, {}};
  gc.seqs = {{19, 0, 3, false}, {1, 40, 0, false}, {13, 64, 5, false}, {1, 0, 1, false}, {1, 7, 4, false}};
  CheckGdn(gc, 202);
}

TEST(GatedDeltaNetTest, KeepColumns4B) {
  // MTP verify: 1 + 3 tokens per seq with columns, beside a seq without them.
  GdnCase gc{k4B, 4, 4, 0, 0, {}};
  gc.seqs = {{4, 30, 2, true}, {1, 9, 0, false}, {4, 0, 3, true}, {3, 12, 1, true}};
  CheckGdn(gc, 203);
}

TEST(GatedDeltaNetTest, SmallOddShapes) {
  // dk / dv not multiples of the 32-row / 16-column tiles, nv:nk ratios 1..4, dv != dk; one kept
  // seq has more tokens than max_columns (only the first max_columns are recorded).
  const cuda::GdnShape shapes[] = {{2, 4, 16, 24}, {1, 3, 24, 16}, {3, 3, 32, 32}, {2, 8, 16, 32},
                                   {1, 2, 48, 40}, {2, 2, 20, 4},  {1, 1, 200, 100}};
  uint32_t seed = 300;
  for (const cuda::GdnShape& shape : shapes) {
    SCOPED_TRACE(fmt::format("nk {} nv {} dk {} dv {}", shape.nk, shape.nv, shape.dk, shape.dv));
    GdnCase gc{shape, 7, 6, 5, 3, {}};
    gc.seqs = {{41, 0, 5, false}, {1, 17, 2, false}, {8, 0, 0, true}, {9, 33, 6, false},
               {1, 2, 1, true},   {5, 11, 3, true}};
    CheckGdn(gc, seed++);
  }
}

TEST(GatedDeltaNetTest, LongPrefillThenDecodeCarriesState) {
  // The same seq across steps on the GPU: a 150-token fresh chunk, then a decode step reading the
  // state the first launch left; both checked against the CPU.
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const cuda::GdnShape shape{2, 4, 32, 24};
  GdnCase first{shape, 2, 1, 0, 0, {{150, 0, 1, false}}};
  std::mt19937 rng(401);
  const StepBatch b1 = MakeBatch(first.seqs);
  const GdnInputs in1 = MakeGdnInputs(first, b1.num_tokens, rng);
  const GdnReference ref1 = CpuGdn(first, b1, in1);
  GdnDevice d1 = UploadGdn(first, in1, b1.num_tokens);
  GPU_ASSERT_OK(RunGdn(first, b1, d1, nullptr));
  CompareGdn(first, in1, ref1, d1);

  GdnCase second{shape, 2, 1, 0, 0, {{1, 150, 1, false}}};
  const StepBatch b2 = MakeBatch(second.seqs);
  GdnInputs in2 = MakeGdnInputs(second, b2.num_tokens, rng);
  in2.a_log = in1.a_log;
  in2.dt_bias = in1.dt_bias;
  in2.norm_w = in1.norm_w;
  in2.state = ToHost(d1.state);  // what the first step left, slot 0 untouched
  const GdnReference ref2 = CpuGdn(second, b2, in2);
  GdnDevice d2 = UploadGdn(second, in2, b2.num_tokens);
  GPU_ASSERT_OK(RunGdn(second, b2, d2, nullptr));
  CompareGdn(second, in2, ref2, d2);
}

TEST(GatedDeltaNetTest, RunsInsideCudaGraph) {
  // The step runs as a captured graph: the cluster launch must capture and replay the same result.
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  GdnCase gc{{2, 4, 32, 48}, 3, 2, 0, 0, {{2, 5, 2, true}, {1, 0, 0, false}}};
  std::mt19937 rng(501);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  const GdnReference ref = CpuGdn(gc, batch, in);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  LaunchInCapturedGraph([&](cudaStream_t stream) { return RunGdn(gc, batch, d, stream); });
  if (HasFatalFailure()) return;
  CompareGdn(gc, in, ref, d);
}

TEST(GatedDeltaNetTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const StepBatch batch = MakeBatch({{2, 0, 0, false}});
  DeviceBuffer<float> buf = PoisonedF32(1 << 16);
  DeviceBuffer<__half> out = PoisonedF16(1024);
  float* p = buf.data();
  const cuda::GdnInput good{p, 2 * 2 * 16 + 4 * 24, p, p, 4, p, 4 * 24};
  auto call = [&](const cuda::GdnInput& in, cuda::GdnShape shape, float* state, float* cols, int max_columns,
                  __half* o, const cuda::RaggedBatchDevice& b) {
    return cuda::GatedDeltaNet(in, shape, p, p, p, 1e-6f, b, state, cols, max_columns, o, nullptr);
  };
  const cuda::GdnShape shape{2, 4, 16, 24};
  auto invalid = [&](absl::Status s, const char* needle) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << std::string(s.message());
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << std::string(s.message());
  };
  invalid(call(good, {2, 5, 16, 24}, p, nullptr, 0, out.data(), batch.device), "nv a multiple of nk");
  invalid(call(good, {2, 4, 16, 22}, p, nullptr, 0, out.data(), batch.device), "dv = 22");
  invalid(call(good, {2, 4, 16, 144}, p, nullptr, 0, out.data(), batch.device), "dv = 144");
  invalid(call(good, {2, 4, 0, 24}, p, nullptr, 0, out.data(), batch.device), "dk = 0");
  invalid(call(good, {2, 4, 300, 24}, p, nullptr, 0, out.data(), batch.device), "dk = 300");
  cuda::GdnInput bad = good;
  bad.mixed_stride -= 1;
  invalid(call(bad, shape, p, nullptr, 0, out.data(), batch.device), "mixed_stride");
  bad = good;
  bad.ab_stride = 3;
  invalid(call(bad, shape, p, nullptr, 0, out.data(), batch.device), "ab_stride");
  bad = good;
  bad.z_stride = 95;
  invalid(call(bad, shape, p, nullptr, 0, out.data(), batch.device), "z_stride");
  bad = good;
  bad.z = nullptr;
  invalid(call(bad, shape, p, nullptr, 0, out.data(), batch.device), "non-null");
  invalid(call(good, shape, p, p, 0, out.data(), batch.device), "max_columns");
  invalid(call(good, shape, p + 1, nullptr, 0, out.data(), batch.device), "16-byte aligned");
  invalid(call(good, shape, p, nullptr, 0, out.data() + 1, batch.device), "8-byte aligned");
  cuda::RaggedBatchDevice no_begin = batch.device;
  no_begin.token_begin = nullptr;
  invalid(call(good, shape, p, nullptr, 0, out.data(), no_begin), "token_begin");
  GPU_ASSERT_OK(call(good, shape, p, nullptr, 0, out.data(), cuda::RaggedBatchDevice{}));  // empty step
}

// Decode at the 4B's shapes: prints the time of one launch (conv + recurrence) per batch size, and
// fails only when far off the design (a few microseconds at batch 1).
TEST(GatedDeltaNetTest, DecodeTiming4B) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  for (const int seqs : {1, 8, 64}) {
    GdnCase gc{k4B, seqs, 1, 0, 0, {}};
    for (int s = 0; s < seqs; ++s) gc.seqs.push_back({1, 100 + s, s, false});
    std::mt19937 rng(600 + seqs);
    const StepBatch batch = MakeBatch(gc.seqs);
    GdnCase one_slot = gc;
    one_slot.num_slots = 1;
    GdnInputs in = MakeGdnInputs(one_slot, batch.num_tokens, rng);  // random state for one slot only
    in.state.resize(static_cast<size_t>(seqs) * 32 * 128 * 128, 0.01f);
    GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
    const int C = 2 * 16 * 128 + 32 * 128;
    DeviceBuffer<float> x = ToDevice(RandomF32(static_cast<size_t>(seqs) * C, rng));
    DeviceBuffer<float> w = ToDevice(RandomF32(static_cast<size_t>(C) * 4, rng));
    DeviceBuffer<float> window = ToDevice(RandomF32(static_cast<size_t>(seqs) * C * 3, rng));
    DeviceBuffer<float> conv_out = PoisonedF32(static_cast<size_t>(seqs) * C);
    cudaEvent_t start, stop;
    ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
    float ms[2] = {0, 0};
    for (int which = 0; which < 2; ++which) {
      constexpr int kIters = 50;
      for (int it = 0; it <= kIters; ++it) {
        if (it == 1) {  // iteration 0 warms up
          ASSERT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
        }
        if (which == 0) {
          GPU_ASSERT_OK(cuda::CausalConv1dSilu(x.data(), C, C, w.data(), 4, batch.device, window.data(), nullptr, 0,
                                               conv_out.data(), nullptr));
        } else {
          GPU_ASSERT_OK(RunGdn(gc, batch, d, nullptr));
        }
      }
      ASSERT_EQ(cudaEventRecord(stop, nullptr), cudaSuccess);
      ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      ASSERT_EQ(cudaEventElapsedTime(&ms[which], start, stop), cudaSuccess);
      ms[which] /= kIters;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    const double state_mb = 2.0 * seqs * 32 * 128 * 128 * 4 / 1e6;  // read + write
    std::printf("[gdn timing] 4B decode batch %d: conv %.2f us, gated delta net %.2f us (%.0f GB/s of state)\n",
                seqs, ms[0] * 1e3, ms[1] * 1e3, state_mb / ms[1]);
    // A sanity bound, not the target: launch overhead + the state streamed at >= 1 TB/s (measured on
    // the H200 at the first run: 742 GB/s at batch 1, ~1.55 TB/s at batch 8 and 64, against ~4.2 TB/s
    // copy bandwidth; the gap is issue 9's batched-decode work).
    EXPECT_LT(ms[1] * 1e3, 20.0 + state_mb) << "gated delta net decode, batch " << seqs;  // MB at 1 TB/s = us
    EXPECT_LT(ms[0] * 1e3, 20.0 + 0.5 * seqs) << "conv decode, batch " << seqs;
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test::gdn
