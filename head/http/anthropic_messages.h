// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages API): request -> OpenAI-shaped
// chat for the template, and the message / streaming-event responses (thinking, text, tool_use).
#pragma once
#include <memory>

#include "head/http/http_server.h"
#include "head/http/json_io.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

// The chat the template sees for an Anthropic request: system + messages (tool_result blocks
// become tool messages, tool_use blocks tool_calls, thinking blocks reasoning_content).
Json AnthropicToChatMessages(const Json& body);
// Anthropic tools -> OpenAI function tools (null when none).
Json AnthropicToChatTools(const Json& body);
// Template variables: enable_thinking from `thinking`.
Json AnthropicTemplateKwargs(const Json& body);

void HandleMessages(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                    std::shared_ptr<ResponseChannel> channel);
// /v1/messages/count_tokens: {"input_tokens": N}.
Json CountTokens(const ServingContext& ctx, const HttpRequest& req);

}  // namespace sparkserve::head::http
