// Token sampling on the GPU, one logits row per sequence, with the semantics of engine/sampler
// (vLLM order): raw logprobs -> banned ids -> logit_bias -> penalties (repetition, frequency,
// presence) -> greedy (temperature < 1e-5) or temperature -> min_p -> top_k -> top_p -> draw with
// the uniform number given per row. Only ids, logprobs and a per-row flag return to the host.
// A row the GPU cannot finish exactly (see needs_host) is left for the host sampler.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kMaxGpuLogprobs = 20;     // top logprobs per row (engine::kMaxLogprobs)
inline constexpr int kMaxGpuCandidates = 1024; // truncated sets larger than this go to the host

// One row's parameters (device array of these, one per row).
struct SamplingRow {
  float temperature = 1.0f;       // < 1e-5: greedy
  int32_t top_k = 0;              // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t num_logprobs = -1;      // -1: none; k in [0, 20]: sampled token's raw logprob + top k
  double uniform = 0.0;           // the row's draw in [0, 1) (engine::UniformAt on the host)
  // Sparse per-row inputs, ranges into the shared arrays below: [begin, end).
  int32_t banned_begin = 0, banned_end = 0;      // ids masked to -inf
  int32_t bias_begin = 0, bias_end = 0;          // (id, bias) pairs, distinct ids (logit_bias is a map)
  int32_t history_begin = 0, history_end = 0;    // distinct ids of prompt + output with output counts
  // Ids outside [0, vocab) in these lists are ignored, as engine::Sampler does.
};

struct SamplingInputs {
  const float* logits = nullptr;       // f32 [rows, vocab] (read only)
  int rows = 0;
  int vocab = 0;
  const SamplingRow* params = nullptr; // [rows]
  const int32_t* banned_ids = nullptr;
  const int32_t* bias_ids = nullptr;
  const float* bias_values = nullptr;
  const int32_t* history_ids = nullptr;     // distinct token ids (prompt or output)
  const int32_t* history_output_counts = nullptr;  // times the id occurs in the output (0: prompt only)
  // Optional [rows, vocab]: the id each column stands for (a candidate row of a split vocabulary,
  // model/split_vocab_sampling.h); sampled and top ids are reported through it. Null: the column.
  const int32_t* id_map = nullptr;
};

struct SamplingOutputs {
  int32_t* ids = nullptr;              // [rows] the sampled id (undefined when needs_host)
  float* logprobs = nullptr;           // [rows] raw logprob of the sampled id (NaN: not asked for, or status != 0)
  int32_t* top_ids = nullptr;          // [rows, kMaxGpuLogprobs] raw top logprobs, best first (lower id on ties);
                                       // entries past min(num_logprobs, 20, vocab): id -1, logprob -inf
  float* top_logprobs = nullptr;       // [rows, kMaxGpuLogprobs]
  // [rows] 0: done; 1: the row needs the host sampler (a truncated set past kMaxGpuCandidates);
  // 2: the row has no finite logit left or holds NaN (the host reports the error).
  int32_t* status = nullptr;
};

// Scratch for `rows` rows of `vocab` (the processed copy of each row that has banned ids, bias or penalties).
size_t SampleWorkspaceBytes(int rows, int vocab);

// One block per row, no host synchronisation (graph-capturable). InvalidArgument on a bad shape or
// a null pointer; per-row parameters live on the device and are not checked (num_logprobs is clamped
// to 20, top_k <= 0 or >= vocab and top_p >= 1 mean off).
absl::Status Sample(const SamplingInputs& in, const SamplingOutputs& out, void* workspace, cudaStream_t stream);

// One tensor-parallel rank's share of sampling over a split vocabulary (model/split_vocab_sampling.h):
// `in` holds this rank's slice, ids [id_begin, id_begin + in.vocab), and its lists hold 0-based ids
// of the slice. Each row is processed as Sample processes it (banned, bias, penalties), then its
// best candidates are written: 1 for a greedy row (temperature < 1e-5), else min(top_k, k), best
// first (the lower id first on equal values), as (value, global id); the rest of the k slots hold
// (-inf, -1). A processed slice holding a NaN writes (NaN, -1) first. candidates: [rows, 2k]
// floats, the values in [0, k) and the ids (int32 bits) in [k, 2k) of each row.
// 1 <= k <= kMaxGpuCandidates; the workspace is SampleWorkspaceBytes(rows, in.vocab).
absl::Status SelectCandidates(const SamplingInputs& in, int id_begin, int k, float* candidates, void* workspace,
                              cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
