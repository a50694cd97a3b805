// OutputParser: the model-output pipeline for one request: reasoning first, then tool calls in
// the content (never inside reasoning), configured by model family and by whether the request
// offered tools. Feed it detokenised pieces as they arrive; Finish() at the end of output.
//
//   OutputParser parser(OutputParserOptions::ForFamily(ModelFamily::kQwen3_5)
//                           .WithTools(schemas).StartingInReasoning(PromptOpensReasoning(prompt)));
//   for (piece : pieces) for (const OutputEvent& e : parser.Feed(piece)) send(e);
//   for (const OutputEvent& e : parser.Finish()) send(e);
//
// Guarantee: the concatenation of all reasoning and content deltas (in event order, with each
// call's raw markup from its kToolCallEnd event in place) is exactly the fed text minus the
// <think>/</think> markup; the result does not depend on how the text was cut into pieces.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "text/output/output_event.h"
#include "text/output/reasoning_parser.h"
#include "text/output/tool_call_parser.h"
#include "text/output/tool_schema.h"

namespace sparkserve::text {

enum class ModelFamily {
  kNone,    // no markup is interpreted: everything is content
  kQwen3,   // <think> reasoning; tool calls in the JSON form
  kQwen3_5, // <think> reasoning; tool calls in the XML form (the JSON form is accepted too); a
            // call opened inside reasoning ends it
};

// "none", "qwen3", "qwen3_5" (also "qwen3.5").
absl::StatusOr<ModelFamily> ParseModelFamily(std::string_view name);

struct OutputParserOptions {
  ModelFamily family = ModelFamily::kNone;
  bool parse_reasoning = false;      // interpret <think> blocks
  bool starts_in_reasoning = false;  // the prompt ended inside an opened <think>
  bool parse_tool_calls = false;     // the request offered tools
  bool accept_xml_calls = false;
  bool accept_json_calls = false;
  // With tool parsing on: "<tool_call>\n<function=" inside reasoning ends the block (the call is
  // then content). Set for Qwen3.5, whose models sometimes call without closing </think>.
  bool tool_call_ends_reasoning = false;
  ToolSchemas tool_schemas;
  std::function<std::string()> make_tool_call_id;  // empty: RandomToolCallId

  // The family's markup; tool parsing stays off until WithTools.
  static OutputParserOptions ForFamily(ModelFamily family);
  OutputParserOptions& WithTools(ToolSchemas schemas);
  OutputParserOptions& StartingInReasoning(bool inside);
};

// Whether a rendered prompt leaves the model inside an open reasoning block (it ends with
// "<think>" plus optional whitespace, as the Qwen3.5 generation prompt "<think>\n" does; with
// enable_thinking=false it ends "<think>\n\n</think>\n\n" and this is false).
bool PromptOpensReasoning(std::string_view prompt);

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);

  OutputEvents Feed(std::string_view piece);
  OutputEvents Finish();

 private:
  void RouteReasoningEvents(const OutputEvents& events, OutputEvents& out, bool final);

  OutputParserOptions options_;
  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
};

// Parses a complete output at once (the non-streaming path).
ParsedOutput ParseCompleteOutput(const OutputParserOptions& options, std::string_view text);

}  // namespace sparkserve::text
