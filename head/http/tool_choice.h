// ToolChoice: the request's tool_choice (OpenAI and Anthropic forms) and its enforcement by forcing
// the start of the assistant's output: `required`/`any` and named choices append the opening of a
// tool call to the prompt ids and the output parser reads that text first, as if generated.
//
// Thinking: a forced choice renders the chat with enable_thinking=false (the model cannot reason
// freely and then be forced into a call without constrained decoding, which vLLM uses after the
// reasoning block); should the prompt still open <think>, the forced text closes it first.
// Usage counts the forced text as prompt tokens (it is in the prompt the model gets); completion
// tokens are what the model generated. A call the model leaves malformed or unfinished comes back
// as content like any malformed call, forced start included.
#pragma once
#include <string>

#include "head/http/openai_chat.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed: the function / tool

  bool forced() const { return mode == Mode::kRequired || mode == Mode::kNamed; }
  // Whether the output is parsed for tool calls (tools given and not `none`).
  bool parses_tools(const Json& tools) const { return !tools.is_null() && mode != Mode::kNone; }
};

// OpenAI: none | auto | required | {"type": "function", "function": {"name": ...}} (400 for bad
// ones, a choice needing tools without them, or a name not in `tools`, OpenAI-shaped).
ToolChoice ReadOpenAiToolChoice(const Json& body, const Json& tools);
// Anthropic: {"type": auto | any | tool | none, "name": ...}; `tools` already OpenAI-shaped.
ToolChoice ReadAnthropicToolChoice(const Json& body, const Json& tools);

// The text a forced choice makes the output begin with ("" when not forced):
//   XML (Qwen3.5):  named "<tool_call>\n<function=NAME>\n", required "<tool_call>\n"
//   JSON (Qwen3):   named "<tool_call>\n{\"name\": \"NAME\", \"arguments\": ", required "<tool_call>\n"
std::string ForcedToolCallText(ToolCallMarkup markup, const ToolChoice& choice);

// For a forced choice: sets enable_thinking=false in `template_kwargs`. 400 when the server's
// output format cannot express tool calls (ToolCallMarkup::kNone).
void PrepareForcedToolChoice(const ServingContext& ctx, const ToolChoice& choice, Json& template_kwargs);

// Appends the forced text to the rendered prompt and its ids (encoded on its own, so the prompt
// ids end with exactly its ids); returns the text the output parser must read first ("" when not
// forced). When the prompt opens reasoning, "</think>\n\n" goes before the call's start in the
// prompt (not in the returned text) and `chat.starts_in_reasoning` becomes false.
std::string ForceToolCallStart(const ServingContext& ctx, const ToolChoice& choice, RenderedChat& chat);

}  // namespace sparkserve::head::http
