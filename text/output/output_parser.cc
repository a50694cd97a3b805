// OutputParser: chains ReasoningParser and ToolCallParser per the request's configuration.
#include "text/output/output_parser.h"

#include "fmt/format.h"

namespace sparkserve::text {

absl::StatusOr<ModelFamily> ParseModelFamily(std::string_view name) {
  if (name == "none") return ModelFamily::kNone;
  if (name == "qwen3") return ModelFamily::kQwen3;
  if (name == "qwen3_5" || name == "qwen3.5") return ModelFamily::kQwen3_5;
  return absl::InvalidArgumentError(fmt::format(
      "unknown output parser family '{}' (expected none, qwen3 or qwen3_5)", std::string(name)));
}

OutputParserOptions OutputParserOptions::ForFamily(ModelFamily family) {
  OutputParserOptions o;
  o.family = family;
  switch (family) {
    case ModelFamily::kNone:
      break;
    case ModelFamily::kQwen3:
      o.parse_reasoning = true;
      o.accept_json_calls = true;
      break;
    case ModelFamily::kQwen3_5:
      o.parse_reasoning = true;
      o.accept_xml_calls = true;
      o.accept_json_calls = true;
      o.tool_call_ends_reasoning = true;
      break;
  }
  return o;
}

OutputParserOptions& OutputParserOptions::WithTools(ToolSchemas schemas) {
  parse_tool_calls = family != ModelFamily::kNone;
  tool_schemas = std::move(schemas);
  return *this;
}

OutputParserOptions& OutputParserOptions::StartingInReasoning(bool inside) {
  starts_in_reasoning = inside;
  return *this;
}

bool PromptOpensReasoning(std::string_view prompt) {
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ' ||
                             prompt.back() == '\r' || prompt.back() == '\t')) {
    prompt.remove_suffix(1);
  }
  return prompt.ends_with("<think>");
}

OutputParser::OutputParser(OutputParserOptions options) : options_(std::move(options)) {
  bool parse_calls =
      options_.parse_tool_calls && (options_.accept_xml_calls || options_.accept_json_calls);
  if (options_.parse_reasoning) {
    reasoning_.emplace(ReasoningParserOptions{
        .starts_in_reasoning = options_.starts_in_reasoning,
        .tool_call_ends_reasoning =
            parse_calls && options_.accept_xml_calls && options_.tool_call_ends_reasoning});
  }
  if (parse_calls) {
    tools_.emplace(ToolCallParserOptions{.accept_xml = options_.accept_xml_calls,
                                         .accept_json = options_.accept_json_calls,
                                         .schemas = options_.tool_schemas,
                                         .make_id = options_.make_tool_call_id});
  }
}

void OutputParser::RouteReasoningEvents(const OutputEvents& events, OutputEvents& out, bool final) {
  for (const OutputEvent& e : events) {
    if (e.kind == OutputEventKind::kContentDelta && tools_) {
      tools_->Feed(e.text, out);
    } else {
      AppendText(out, e.kind, e.text);
    }
  }
  if (final && tools_) tools_->Finish(out);
}

OutputEvents OutputParser::Feed(std::string_view piece) {
  OutputEvents out;
  if (reasoning_) {
    OutputEvents stage;
    reasoning_->Feed(piece, stage);
    RouteReasoningEvents(stage, out, /*final=*/false);
  } else if (tools_) {
    tools_->Feed(piece, out);
  } else {
    AppendText(out, OutputEventKind::kContentDelta, piece);
  }
  return out;
}

OutputEvents OutputParser::Finish() {
  OutputEvents out;
  if (reasoning_) {
    OutputEvents stage;
    reasoning_->Finish(stage);
    RouteReasoningEvents(stage, out, /*final=*/true);
  } else if (tools_) {
    tools_->Finish(out);
  }
  return out;
}

ParsedOutput ParseCompleteOutput(const OutputParserOptions& options, std::string_view text) {
  OutputParser parser(options);
  ParsedOutput result;
  result.Apply(parser.Feed(text));
  result.Apply(parser.Finish());
  return result;
}

}  // namespace sparkserve::text
