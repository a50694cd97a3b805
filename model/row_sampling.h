// RowSampling / SampledRow: sampling on the runner's device. The engine flattens one sequence's
// sampling parameters and context into a RowSampling per logits row; a runner that samples on its
// device (ModelRunner::samples_on_device) returns a SampledRow per row, so only ids and requested
// logprobs cross to the host. Semantics are engine/sampler.h's, which the engine falls back
// to for rows the device leaves (status kNeedsHost / kNoFiniteLogit; their logits are returned).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace sparkserve::model {

struct RowSampling {
  float temperature = 1.0f;  // < 1e-5: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t num_logprobs = -1;  // -1: none; k >= 0: the sampled id's raw logprob + the top k (k <= 20)
  double uniform = 0.0;       // this draw's uniform in [0, 1) (engine::UniformAt)
  // The row of the step's TokenMasks (model/step_plan.h) this draw must keep to (structured
  // outputs): tokens outside it are -inf before anything else; -1: no constraint.
  int32_t mask_row = -1;
  std::vector<int32_t> banned;                    // ids masked to -inf
  std::vector<std::pair<int32_t, float>> bias;    // logit_bias
  std::vector<int32_t> history_ids;               // distinct ids of prompt + output (penalties)
  std::vector<int32_t> history_output_counts;     // per history id: occurrences in the output
};

struct SampledRow {
  enum Status : int32_t { kDone = 0, kNeedsHost = 1, kNoFiniteLogit = 2 };
  Status status = kDone;
  int32_t id = 0;
  float logprob = 0.0f;                               // raw, when num_logprobs >= 0
  std::vector<std::pair<int32_t, float>> top_logprobs;  // raw, best first
};

}  // namespace sparkserve::model
