// Sampling and stopping fields shared by the generate endpoints (OpenAI names, as vLLM accepts
// them), their validation, and the max_tokens-versus-context check.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "head/http/json_io.h"
#include "head/http/serving_backend.h"
#include "scheduler/request.h"

namespace sparkserve::head::http {

struct SamplingFields {
  scheduler::SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  std::optional<int64_t> max_tokens;  // as requested (null: up to the context)
  int32_t min_tokens = 0;
  int32_t n = 1;
};

// Reads temperature, top_p, top_k, min_p, presence/frequency/repetition penalties, seed,
// logit_bias, stop, stop_token_ids, ignore_eos, include_stop_str_in_output, skip_special_tokens,
// min_tokens, n and max_tokens / max_completion_tokens (`max_tokens_keys`, first present wins).
// Unset fields take ctx.default_sampling. Throws RequestError (400) naming the field.
SamplingFields ReadSamplingFields(const Json& body, const ServingContext& ctx,
                                  const std::vector<const char*>& max_tokens_keys);

// The max_tokens to run with: the requested one if prompt + it fits ctx.max_seq_len (else 400),
// or, when none was requested, the room left (capped by ctx.default_max_tokens).
int32_t ResolveMaxTokens(const ServingContext& ctx, size_t prompt_tokens,
                         std::optional<int64_t> requested, const char* param);

// Refuses (400 naming `param`) text of `bytes` bytes that cannot fit the context whatever it
// tokenizes to (more than max_seq_len tokens of the codec's longest, with room for normalisation):
// checked before tokenizing, so an oversized prompt costs no tokenizer time.
void CheckPromptBytes(const ServingContext& ctx, size_t bytes, const char* param);

// Reads "stop"-like fields: a string or an array of at most ctx.max_stop_strings non-empty strings
// of at most ctx.max_stop_string_bytes bytes each.
std::vector<std::string> ReadStopStrings(const Json& body, const char* key, const ServingContext& ctx);

// Builds the engine request from the fields and the prompt.
scheduler::Request MakeEngineRequest(const SamplingFields& f, std::vector<int32_t> prompt_ids,
                                     int32_t max_tokens);

// Checks the model name a request names, if any (404 when it is not the served one).
void CheckModelName(const Json& body, const ServingContext& ctx);

}  // namespace sparkserve::head::http
