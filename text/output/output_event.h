// OutputEvent: what the output parsers emit (reasoning/content text deltas and tool-call events),
// and ParsedOutput, the structure those events add up to (the non-streaming response).
#pragma once
#include <string>
#include <vector>

namespace sparkserve::text {

enum class OutputEventKind {
  kReasoningDelta,          // text: reasoning (inside <think>...</think>), markup removed
  kContentDelta,            // text: answer text outside reasoning and outside tool calls
  kToolCallStart,           // index, id, name
  kToolCallArgumentsDelta,  // index, text: a JSON fragment; a call's fragments concatenate to
                            // its arguments (a JSON object serialised as a string)
  kToolCallEnd,             // index, text: the call's raw markup (<tool_call>...</tool_call>)
};

struct OutputEvent {
  OutputEventKind kind = OutputEventKind::kContentDelta;
  std::string text;
  int index = -1;    // tool-call events: 0-based index of the call within this output
  std::string id;    // kToolCallStart
  std::string name;  // kToolCallStart

  static OutputEvent Reasoning(std::string text);
  static OutputEvent Content(std::string text);
  bool operator==(const OutputEvent&) const = default;
};

using OutputEvents = std::vector<OutputEvent>;

// Appends a reasoning/content delta, merging it into the previous event when that has the same
// kind (empty text is dropped).
void AppendText(OutputEvents& out, OutputEventKind kind, std::string_view text);

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON object text, keys in the order the model emitted them
  bool operator==(const ParsedToolCall&) const = default;
};

// The accumulated result of a parse: Apply every event in order.
struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;

  void Apply(const OutputEvent& event);
  void Apply(const OutputEvents& events);
  bool operator==(const ParsedOutput&) const = default;
};

const char* OutputEventKindName(OutputEventKind kind);

}  // namespace sparkserve::text
