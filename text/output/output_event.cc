// OutputEvent constructors and the ParsedOutput accumulator.
#include "text/output/output_event.h"

namespace sparkserve::text {

OutputEvent OutputEvent::Reasoning(std::string text) {
  return OutputEvent{.kind = OutputEventKind::kReasoningDelta, .text = std::move(text)};
}

OutputEvent OutputEvent::Content(std::string text) {
  return OutputEvent{.kind = OutputEventKind::kContentDelta, .text = std::move(text)};
}

void AppendText(OutputEvents& out, OutputEventKind kind, std::string_view text) {
  if (text.empty()) return;
  if (!out.empty() && out.back().kind == kind) {
    out.back().text.append(text);
    return;
  }
  out.push_back(OutputEvent{.kind = kind, .text = std::string(text)});
}

void ParsedOutput::Apply(const OutputEvent& event) {
  switch (event.kind) {
    case OutputEventKind::kReasoningDelta:
      reasoning += event.text;
      break;
    case OutputEventKind::kContentDelta:
      content += event.text;
      break;
    case OutputEventKind::kToolCallStart:
      if (event.index >= 0 && static_cast<size_t>(event.index) >= tool_calls.size()) {
        tool_calls.resize(static_cast<size_t>(event.index) + 1);
      }
      if (event.index >= 0) {
        tool_calls[static_cast<size_t>(event.index)].id = event.id;
        tool_calls[static_cast<size_t>(event.index)].name = event.name;
      }
      break;
    case OutputEventKind::kToolCallArgumentsDelta:
      if (event.index >= 0 && static_cast<size_t>(event.index) < tool_calls.size()) {
        tool_calls[static_cast<size_t>(event.index)].arguments += event.text;
      }
      break;
    case OutputEventKind::kToolCallEnd:
      break;
  }
}

void ParsedOutput::Apply(const OutputEvents& events) {
  for (const OutputEvent& e : events) Apply(e);
}

const char* OutputEventKindName(OutputEventKind kind) {
  switch (kind) {
    case OutputEventKind::kReasoningDelta: return "reasoning_delta";
    case OutputEventKind::kContentDelta: return "content_delta";
    case OutputEventKind::kToolCallStart: return "tool_call_start";
    case OutputEventKind::kToolCallArgumentsDelta: return "tool_call_arguments_delta";
    case OutputEventKind::kToolCallEnd: return "tool_call_end";
  }
  return "unknown";
}

}  // namespace sparkserve::text
