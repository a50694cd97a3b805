// Shared pieces of the Gated DeltaNet GPU tests (gdn_conv_test.cc, gdn_test.cc): a step's ragged
// layout built from per-seq specs (device RaggedBatchDevice + CPU RaggedSeq view) and exact /
// untouched-region comparisons of state buffers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/ragged_batch.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {

namespace cuda = kernels::cuda;
namespace cpu = kernels::cpu;

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Captures `launch(stream)` (returning absl::Status) in a CUDA graph on a fresh stream, replays the
// graph once and waits: decode steps run as graphs, so a kernel must capture and replay cleanly.
template <typename Launch>
void LaunchInCapturedGraph(Launch launch) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status launched = launch(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  GPU_ASSERT_OK(launched);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// One seq of a step: its tokens, the position of the first, its state slot, MTP-verify columns.
struct SeqSpec {
  int tokens = 1;
  int start_pos = 0;
  int slot = 0;
  bool keep = false;
};

// A step's ragged layout on the device, and the CPU view of it.
struct StepBatch {
  DeviceBuffer<int32_t> token_begin, start_pos, token_seq, positions, slots;
  DeviceBuffer<uint8_t> keep;
  cuda::RaggedBatchDevice device;
  std::vector<cpu::RaggedSeq> seqs;
  int num_tokens = 0;
};

inline StepBatch MakeBatch(const std::vector<SeqSpec>& specs) {
  std::vector<int32_t> begin{0}, start, token_seq, positions, slots;
  std::vector<uint8_t> keep;
  StepBatch b;
  int max_tokens = 1;
  for (size_t s = 0; s < specs.size(); ++s) {
    const SeqSpec& sp = specs[s];
    b.seqs.push_back({begin.back(), sp.tokens, sp.start_pos});
    for (int i = 0; i < sp.tokens; ++i) {
      token_seq.push_back(static_cast<int32_t>(s));
      positions.push_back(sp.start_pos + i);
    }
    begin.push_back(begin.back() + sp.tokens);
    start.push_back(sp.start_pos);
    slots.push_back(sp.slot);
    keep.push_back(sp.keep ? 1 : 0);
    max_tokens = std::max(max_tokens, sp.tokens);
  }
  b.num_tokens = begin.back();
  b.token_begin = ToDevice(begin);
  b.start_pos = ToDevice(start);
  b.token_seq = ToDevice(token_seq);
  b.positions = ToDevice(positions);
  b.slots = ToDevice(slots);
  b.keep = ToDevice(keep);
  b.device.num_seqs = static_cast<int>(specs.size());
  b.device.num_tokens = b.num_tokens;
  b.device.max_seq_tokens = max_tokens;
  b.device.token_begin = b.token_begin.data();
  b.device.start_pos = b.start_pos.data();
  b.device.token_seq = b.token_seq.data();
  b.device.positions = b.positions.data();
  b.device.slots = b.slots.data();
  b.device.keep_columns = b.keep.data();
  return b;
}

inline bool AnyKeep(const std::vector<SeqSpec>& specs) {
  return std::any_of(specs.begin(), specs.end(), [](const SeqSpec& s) { return s.keep; });
}

// Elements i < n where got[got_at + i] differs from want[want_at + i] (NaN equals NaN): copies must
// be exact and untouched regions must stay bit-for-bit what they were.
inline int CountDiffering(const std::vector<float>& got, size_t got_at, const std::vector<float>& want, size_t want_at,
                   size_t n) {
  if (got_at + n > got.size() || want_at + n > want.size()) return static_cast<int>(n) + 1;
  int differing = 0;
  for (size_t i = 0; i < n; ++i) {
    const float g = got[got_at + i], w = want[want_at + i];
    differing += ((std::isnan(g) && std::isnan(w)) || g == w) ? 0 : 1;
  }
  return differing;
}

// Same, for an untouched region: every element still NaN.
inline int CountNotNaN(const std::vector<float>& got, size_t at, size_t n) {
  int written = 0;
  for (size_t i = at; i < at + n; ++i) written += std::isnan(got[i]) ? 0 : 1;
  return written;
}

inline std::vector<float> Slice(const std::vector<float>& v, size_t begin, size_t n) {
  return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(begin),
                            v.begin() + static_cast<std::ptrdiff_t>(begin + n));
}

}  // namespace sparkserve::gpu_test::gdn
