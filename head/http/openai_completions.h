// POST /v1/completions: a text or token-id prompt (one per request), echo, logprobs; the
// text_completion response, streamed or whole.
#pragma once
#include <memory>

#include "head/http/http_server.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

// The prompt's token ids: a string (tokenized with special tokens added as the tokenizer does), a
// list of ids, or a one-element list of either. Several prompts: 400.
std::vector<int32_t> ReadCompletionPrompt(const ServingContext& ctx, const Json& body, std::string* text);

void HandleCompletions(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                       std::shared_ptr<ResponseChannel> channel);

}  // namespace sparkserve::head::http
