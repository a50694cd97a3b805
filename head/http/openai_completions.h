// POST /v1/completions: a text or token-id prompt, or a list of them (one choice per prompt times
// n), echo, logprobs; the text_completion response, streamed or whole.
#pragma once
#include <memory>

#include "head/http/http_server.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

// Prompts of one request at most, and prompts times n (the sequences one request may hold).
inline constexpr size_t kMaxCompletionPrompts = 128;

struct CompletionPrompt {
  std::vector<int32_t> ids;
  std::string text;  // the prompt text (decoded from ids when ids were given), for echo
};

// The prompts of `prompt`: a string (tokenized with special tokens added as the tokenizer does), a
// list of token ids, or a list of either (strings, or token-id lists). 400 for anything else, an
// empty prompt, or more than kMaxCompletionPrompts.
std::vector<CompletionPrompt> ReadCompletionPrompts(const ServingContext& ctx, const Json& body);

void HandleCompletions(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                       std::shared_ptr<ResponseChannel> channel);

}  // namespace sparkserve::head::http
