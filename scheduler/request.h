// Request: what the HTTP layer hands the engine (token ids, sampling, stop rules, limits), and the
// events the engine streams back. No tensors, no HTTP, no JSON here.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/output_constraint.h"

namespace sparkserve::scheduler {

using RequestId = uint64_t;

struct SamplingParams {
  float temperature = 1.0f;        // 0 = greedy
  int32_t top_k = 0;               // 0 or -1 = off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f; // 1 = off
  std::optional<uint64_t> seed;    // reproducible per request when set
  std::map<int32_t, float> logit_bias;
  int32_t logprobs = -1;           // -1 = none; k >= 0: sampled token's logprob + top k
};

struct StopRules {
  std::vector<int32_t> stop_token_ids;   // in addition to the model's eos ids (unless ignore_eos)
  std::vector<std::string> stop_strings; // matched on detokenised text, withheld from output
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
};

struct Request {
  RequestId id = 0;
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  StopRules stop;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  int32_t n = 1;                   // parallel samples of the same prompt
  std::shared_ptr<const OutputConstraint> constraint;  // structured output; null: free text
  // Prompt positions worth a prefix-cache checkpoint: where the chat's complete messages end (the
  // part the next turn repeats). Empty: the scheduler's own choice.
  std::vector<int32_t> cache_points;
};

enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kError };

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

// One event on a request's output channel.
struct TokenEvent {
  int32_t index = 0;                      // which of the n samples
  std::vector<int32_t> ids;               // new token ids (usually one)
  std::vector<TokenLogprob> logprobs;     // per new id when requested: sampled token's logprob
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per new id: top k
  FinishReason finish = FinishReason::kNone;  // set on the sample's last event
  std::string error;                      // with kError
  // With kError: the server could not run the request now (a tensor-parallel node was lost); a
  // retry later may succeed (HTTP 503 with Retry-After rather than 500).
  bool unavailable = false;
  // Prompt tokens of this sample taken from the prefix cache instead of prefilled (on every event
  // with ids).
  int32_t cached_tokens = 0;
};

}  // namespace sparkserve::scheduler
