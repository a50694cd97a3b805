// Sampler: picks one sequence's next token from its f32 logits row (rank 0, on the CPU), in vLLM's
// order: the structured-output mask (disallowed tokens -inf, as vLLM applies its grammar bitmask
// before the sampler) -> raw logprobs -> banned ids (stop ids below min_tokens) -> logit_bias -> penalties
// (repetition, frequency, presence) -> greedy (temperature < 1e-5) or temperature -> min_p -> top_k
// -> top_p -> draw. Logprobs are vLLM's default `raw_logprobs`: log-softmax of the model's logits
// before any bias, penalty or temperature. Randomness is a counter-based stream per sequence
// (seed, index of the token in its output), so a seeded request gives the same tokens whatever the
// batch, the step timing or preemption.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/row_sampling.h"
#include "scheduler/request.h"

namespace sparkserve::engine {

inline constexpr int32_t kMaxLogprobs = 20;          // most top_logprobs per token (vLLM's default cap)
inline constexpr float kGreedyTemperature = 1e-5f;   // below this, sampling is argmax (vLLM)

// What the sampler needs to know about one sequence at one step.
struct SamplingContext {
  const scheduler::SamplingParams* params = nullptr;
  std::span<const int32_t> prompt;   // repetition_penalty looks at prompt + output
  std::span<const int32_t> output;   // frequency/presence penalties look at output only
  std::span<const int32_t> banned;   // ids masked to -inf (eos/stop ids while below min_tokens)
  uint64_t rng_seed = 0;             // the sequence's stream (SequenceSeed)
  // Structured outputs: bit v % 32 of allowed[v / 32] set iff token v may be drawn (empty: all).
  std::span<const uint32_t> allowed;
};

struct SampledToken {
  int32_t id = 0;
  float logprob = 0.0f;                                  // raw logprob (when params.logprobs >= 0)
  std::vector<scheduler::TokenLogprob> top_logprobs;     // raw, best first, ties by lower id
};

struct TokenProb {
  int32_t id = 0;
  double prob = 0.0;
};

// A sequence's prompt + output as distinct ids with their output counts (0: prompt only), kept up to
// date draw by draw: the engine keeps one per sequence, so a penalised draw costs its new tokens
// rather than a pass over the whole history.
class PenaltyHistory {
 public:
  // Brings the history to `prompt` + `output`: appends the output tokens since the last call, or
  // starts over when the prompt or the already-counted output changed length.
  void Sync(std::span<const int32_t> prompt, std::span<const int32_t> output);
  const std::vector<int32_t>& ids() const { return ids_; }            // distinct, in first-seen order
  const std::vector<int32_t>& output_counts() const { return counts_; }  // per id

 private:
  std::vector<int32_t> ids_, counts_;
  std::unordered_map<int32_t, size_t> index_;  // id -> its position in ids_
  size_t prompt_size_ = 0, output_size_ = 0;
  bool started_ = false;
};

// One draw flattened for a sampler on the model runner's device (model/row_sampling.h): the
// context's parameters, banned ids and logit bias, this draw's uniform (UniformAt(rng_seed,
// output size)), and, when a penalty is on, prompt + output as distinct ids with output counts
// (from `history`, synced here, when given; else counted afresh).
model::RowSampling ToRowSampling(const SamplingContext& ctx, PenaltyHistory* history = nullptr);

// The per-sequence random stream: from the request's seed and the sample's index among n.
uint64_t SequenceSeed(uint64_t request_seed, int32_t sample_index);
// Uniform in [0, 1) for draw number `counter` of stream `seed` (stateless, splitmix64).
double UniformAt(uint64_t seed, uint64_t counter);

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  // The next token for one sequence. Fails on a row of the wrong size or one with no finite logit
  // (NaN anywhere, or everything masked).
  absl::StatusOr<SampledToken> Sample(std::span<const float> logits, const SamplingContext& ctx);

  // The processing steps, exposed for tests. In place: banned -> -inf, + logit_bias, then
  // repetition (HF: l > 0 ? l / r : l * r, once per distinct token of prompt + output), frequency
  // (- f * count in output) and presence (- p if in output).
  void ProcessLogits(std::span<float> logits, const SamplingContext& ctx);
  // The distribution sampling draws from (temperature > 0): softmax(logits / T), minus tokens below
  // min_p * max prob, beyond the top_k, or past the top_p mass (a token stays while the mass of the
  // tokens more probable than it is < top_p; mass within 1e-6 of top_p counts as reaching it),
  // renormalised. Best first when top_k or top_p truncate, else in id order.
  absl::StatusOr<std::vector<TokenProb>> Truncate(std::span<const float> logits,
                                                  const scheduler::SamplingParams& params);

 private:
  // Truncate into kept_ (no copy).
  absl::Status BuildDistribution(std::span<const float> logits, const scheduler::SamplingParams& params);

  int32_t vocab_size_;
  std::vector<TokenProb> kept_;       // the distribution being drawn from (capacity: vocab)
  std::vector<float> masked_;         // [vocab] the row with the structured-output mask applied
  std::vector<float> processed_;      // [vocab] working copy of the row
  std::vector<uint32_t> seen_epoch_;  // [vocab] repetition penalty: token seen in this call
  uint32_t epoch_ = 0;
  std::vector<int32_t> counts_;       // [vocab] output counts (zeroed after each use)
};

}  // namespace sparkserve::engine
