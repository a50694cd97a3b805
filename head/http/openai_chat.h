// POST /v1/chat/completions: request -> chat template -> engine request, and the chat.completion /
// chat.completion.chunk responses (reasoning_content, tool_calls, logprobs, usage).
#pragma once
#include <memory>
#include <string>

#include "head/http/generation.h"
#include "head/http/http_server.h"
#include "head/http/json_io.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

// OpenAI `messages` as the chat template wants them: text parts joined into a string (image or
// audio parts: 400), an assistant's null or absent content as "" (a tool-call turn as the SDK
// returns it), assistant tool-call arguments parsed into objects, roles checked.
Json NormalizeChatMessages(const Json& messages);
// OpenAI `reasoning_effort` for templates that know only enable_thinking (the Qwen ones): "none"
// turns thinking off and every other level on, unless `template_kwargs` (chat_template_kwargs) set
// enable_thinking themselves; the level is also a template variable, as vLLM passes it. 400 for a
// value the OpenAI API does not define.
void ApplyReasoningEffort(const Json& body, Json& template_kwargs);
// OpenAI `tools` checked ({type: function, function: {name, ...}}); null when absent or empty.
Json NormalizeChatTools(const Json& body);

// Checks one tool definition (either API): a name of 1-128 characters from [A-Za-z0-9_.:-], a string
// description, and a parameter schema that is a JSON Schema object ({"type": "object", "properties":
// {...}, "required": [...]}). 400 naming `param` and `where` (e.g. "tools[2]") otherwise.
void CheckToolDefinition(const Json& name, const Json* description, const Json* schema, const char* schema_key,
                         const std::string& where, const char* param);

// A rendered chat prompt and what the output parser must know about it.
struct RenderedChat {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool starts_in_reasoning = false;
  // Prefix-cache checkpoint positions (ServingContext::prefix_cache): where the conversation's
  // last complete message ends, and where a leading system message ends.
  std::vector<int32_t> cache_points;
};

// Prefix-cache checkpoint positions of a chat prompt (see RenderedChat::cache_points).
std::vector<int32_t> ChatCachePoints(const ServingContext& ctx, const Json& messages, const Json& tools,
                                     const Json& kwargs, const std::vector<int32_t>& prompt_ids);

// Renders `messages`/`tools` with the template (400 when the template rejects them) and tokenizes.
RenderedChat RenderChatPrompt(const ServingContext& ctx, const Json& messages, const Json& tools,
                              bool add_generation_prompt, bool continue_final_message,
                              const Json& template_kwargs);

void HandleChatCompletions(const ServingContext& ctx, ServingMetrics* metrics,
                           const HttpRequest& req, std::shared_ptr<ResponseChannel> channel);

// The OpenAI logprob value for JSON (-inf becomes -9999.0, as vLLM does).
double JsonLogprob(float lp);

}  // namespace sparkserve::head::http
