// ToolCallParser: finds Qwen tool calls in streamed content text and turns them into structured
// calls; all other text passes through as content deltas, byte for byte.
//
// Accepted forms (each can be switched off):
//   XML (Qwen3.5 / Qwen3-Coder):
//     <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//     One newline after <parameter=ARG> and one before </parameter> are markup; the value in
//     between is converted to the type the tool's schema declares (ConvertParameterValue). A
//     "</parameter>" only closes the value when what follows it (after whitespace) is
//     "<parameter=", "</function>" or "</tool_call>"; inside a value, a "<parameter=" at a line
//     start opens a nested literal block whose own "</parameter>" is value text. So values may
//     contain newlines, "<", and even quoted tool-call markup. (vLLM also requires the next
//     parameter's name to be declared in the schema; here an undeclared parameter the model
//     invents is still a parameter, kept as text, rather than swallowed into the previous value.)
//   JSON (Qwen3):  <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
//     The object is delimited structurally (braces outside strings), so "</tool_call>" inside a
//     JSON string is part of the value. "arguments" may also be a string holding a JSON object.
// Arguments are serialised like Python's json.dumps(..., ensure_ascii=False) with keys in the
// order emitted (a repeated XML parameter keeps its first position and its last value, as a
// Python dict would).
//
// A call's events (tool_call_start, one tool_call_arguments_delta, tool_call_end) are emitted when
// its closing </tool_call> is read: only then is it decided that the text is a call. Until then the
// call's text is held. A malformed call (unclosed at the end, no or invalid function name, text
// where markup must be, bad JSON) is not a call: its "<tool_call>" goes out as content and the text
// after it is scanned again as content (so a later well-formed call is still found). Nothing
// throws.
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "text/output/output_event.h"
#include "text/output/tool_schema.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text {

// Default tool-call ids: "call_" + 24 random hex digits (the form vLLM uses).
std::string RandomToolCallId();

struct ToolCallParserOptions {
  bool accept_xml = true;
  bool accept_json = true;
  ToolSchemas schemas;                    // parameter types (XML form conversion)
  std::function<std::string()> make_id;   // id of each call; empty: RandomToolCallId
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallParserOptions options);

  // Consumes the next piece of content text; appends content and tool-call events.
  void Feed(std::string_view piece, OutputEvents& out);
  // End of output: held text is released (an unfinished call as plain content).
  void Finish(OutputEvents& out);

  int num_calls() const { return next_index_; }

 private:
  enum class State {
    kContent,
    kCallOpen,         // after <tool_call>: whitespace, then "{" or "<function="
    kJsonBody,         // inside the JSON object
    kAfterJson,        // after the object: whitespace, then </tool_call>
    kFunctionName,     // after "<function=": NAME up to ">"
    kFunctionBody,     // between parameters: <parameter=, </function> or </tool_call>
    kParameterName,    // after "<parameter=": NAME up to ">"
    kValueStart,       // after "<parameter=NAME>": an optional newline
    kValue,            // value text up to a closing </parameter>
    kAfterValueClose,  // after a </parameter> at depth 0: decides whether it closes the value
    kAfterFunction,    // after </function>: whitespace, then </tool_call>
  };
  enum class Step { kProgress, kNeedMore };
  enum class Match { kYes, kMaybe, kNo };

  void Run(bool final, OutputEvents& out);
  Step StepContent(bool final, OutputEvents& out);
  Step StepCallOpen(bool final, OutputEvents& out);
  Step StepJsonBody(bool final, OutputEvents& out);
  Step StepFunctionName(bool final, OutputEvents& out);
  Step StepFunctionBody(bool final, OutputEvents& out);
  Step StepParameterName(bool final, OutputEvents& out);
  Step StepValueStart(bool final, OutputEvents& out);
  Step StepValue(bool final, OutputEvents& out);
  Step StepAfterValueClose(bool final, OutputEvents& out);
  Step StepCallClose(bool final, OutputEvents& out);  // kAfterJson, kAfterFunction

  std::string_view Rest() const { return std::string_view(buf_).substr(pos_); }
  void Consume(size_t n);
  size_t SkipWhitespace();
  Match MatchLiteral(std::string_view literal, bool final) const;
  void FinishParameter();
  Step Complete(OutputEvents& out);
  Step Fail(OutputEvents& out);
  void ResetCall();

  ToolCallParserOptions options_;
  State state_ = State::kContent;
  std::string buf_;  // text not yet consumed starts at pos_
  size_t pos_ = 0;
  int next_index_ = 0;

  // The call being read.
  std::string call_raw_;  // all text consumed since (and including) its <tool_call>
  std::string name_;
  const nlohmann::json* properties_ = nullptr;
  nlohmann::ordered_json arguments_;
  std::string parameter_name_;
  std::string value_;
  int value_depth_ = 0;         // nested literal <parameter= blocks open inside the value
  std::string pending_close_;   // "</parameter>" + whitespace awaiting a decision
  std::string json_text_;
  int json_depth_ = 0;
  bool json_in_string_ = false;
  bool json_escape_ = false;
};

}  // namespace sparkserve::text
