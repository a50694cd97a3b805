// ToolCallParser: the tool-call state machine (see tool_call_parser.h for the accepted forms).
// Every decision depends only on the text read so far (or on the end of output), never on where
// the pieces were cut, so any chunking of the same output gives the same result.
#include "text/output/tool_call_parser.h"

#include <random>

#include "fmt/format.h"
#include "text/output/json_nesting.h"
#include "text/output/partial_tag.h"
#include "text/output/python_json.h"

namespace sparkserve::text {
namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";
constexpr size_t kMaxNameBytes = 256;

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Function names: what vLLM accepts (no braces, angle brackets, quotes or whitespace).
bool IsForbiddenInFunctionName(char c) {
  return c == '{' || c == '}' || c == '<' || c == '>' || c == '"' || c == '\'' || IsWhitespace(c);
}
// Parameter names: anything on one line without markup.
bool IsForbiddenInParameterName(char c) { return c == '<' || c == '\n' || c == '\r'; }

enum class NameScan { kFound, kNeedMore, kInvalid };

// Reads NAME in "NAME>" at the start of `text`; `length` gets NAME's length when found.
NameScan ScanName(std::string_view text, bool function_name, bool final, size_t& length) {
  for (size_t i = 0; i < text.size() && i <= kMaxNameBytes; ++i) {
    char c = text[i];
    if (c == '>') {
      if (i == 0) return NameScan::kInvalid;
      length = i;
      return NameScan::kFound;
    }
    if (function_name ? IsForbiddenInFunctionName(c) : IsForbiddenInParameterName(c)) {
      return NameScan::kInvalid;
    }
  }
  if (final || text.size() > kMaxNameBytes) return NameScan::kInvalid;
  return NameScan::kNeedMore;
}

}  // namespace

std::string RandomToolCallId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t high = rng();
  uint64_t low = rng();
  return fmt::format("call_{:016x}{:08x}", high, static_cast<uint32_t>(low));
}

ToolCallParser::ToolCallParser(ToolCallParserOptions options) : options_(std::move(options)) {}

void ToolCallParser::Feed(std::string_view piece, OutputEvents& out) {
  buf_.append(piece);
  Run(/*final=*/false, out);
}

void ToolCallParser::Finish(OutputEvents& out) { Run(/*final=*/true, out); }

void ToolCallParser::Run(bool final, OutputEvents& out) {
  while (true) {
    Step step = Step::kNeedMore;
    switch (state_) {
      case State::kContent: step = StepContent(final, out); break;
      case State::kCallOpen: step = StepCallOpen(final, out); break;
      case State::kJsonBody: step = StepJsonBody(final, out); break;
      case State::kAfterJson: step = StepCallClose(final, out); break;
      case State::kFunctionName: step = StepFunctionName(final, out); break;
      case State::kFunctionBody: step = StepFunctionBody(final, out); break;
      case State::kParameterName: step = StepParameterName(final, out); break;
      case State::kValueStart: step = StepValueStart(final, out); break;
      case State::kValue: step = StepValue(final, out); break;
      case State::kAfterValueClose: step = StepAfterValueClose(final, out); break;
      case State::kAfterFunction: step = StepCallClose(final, out); break;
    }
    if (step == Step::kProgress) continue;
    // At the end of output a call still open can never complete: it is plain text.
    if (final && state_ != State::kContent) {
      Fail(out);
      continue;
    }
    break;
  }
  buf_.erase(0, pos_);
  pos_ = 0;
}

void ToolCallParser::Consume(size_t n) {
  if (state_ != State::kContent) call_raw_.append(Rest().substr(0, n));
  pos_ += n;
}

size_t ToolCallParser::SkipWhitespace() {
  std::string_view rest = Rest();
  size_t n = 0;
  while (n < rest.size() && IsWhitespace(rest[n])) ++n;
  Consume(n);
  return n;
}

ToolCallParser::Match ToolCallParser::MatchLiteral(std::string_view literal, bool final) const {
  std::string_view rest = Rest();
  if (rest.starts_with(literal)) return Match::kYes;
  if (!final && IsProperPrefixOf(rest, literal)) return Match::kMaybe;
  return Match::kNo;
}

void ToolCallParser::ResetCall() {
  call_raw_.clear();
  name_.clear();
  properties_ = nullptr;
  arguments_ = nlohmann::ordered_json::object();
  parameter_name_.clear();
  value_.clear();
  value_depth_ = 0;
  pending_close_.clear();
  json_text_.clear();
  json_depth_ = 0;
  json_in_string_ = false;
  json_escape_ = false;
}

ToolCallParser::Step ToolCallParser::Fail(OutputEvents& out) {
  std::string rescan = call_raw_.substr(kCallOpen.size());
  rescan.append(Rest());
  AppendText(out, OutputEventKind::kContentDelta, kCallOpen);
  buf_ = std::move(rescan);
  pos_ = 0;
  ResetCall();
  state_ = State::kContent;
  return Step::kProgress;
}

ToolCallParser::Step ToolCallParser::Complete(OutputEvents& out) {
  int index = next_index_++;
  OutputEvent start{.kind = OutputEventKind::kToolCallStart, .index = index};
  start.id = options_.make_id ? options_.make_id() : RandomToolCallId();
  start.name = name_;
  out.push_back(std::move(start));
  out.push_back(OutputEvent{.kind = OutputEventKind::kToolCallArgumentsDelta,
                            .text = DumpPythonStyleJson(arguments_),
                            .index = index});
  out.push_back(OutputEvent{.kind = OutputEventKind::kToolCallEnd, .text = call_raw_, .index = index});
  ResetCall();
  state_ = State::kContent;
  return Step::kProgress;
}

ToolCallParser::Step ToolCallParser::StepContent(bool final, OutputEvents& out) {
  std::string_view rest = Rest();
  TagMatch m = FindFirstTag(rest, {kCallOpen});
  if (m.found()) {
    AppendText(out, OutputEventKind::kContentDelta, rest.substr(0, m.pos));
    pos_ += m.pos + kCallOpen.size();
    ResetCall();
    call_raw_ = kCallOpen;
    state_ = State::kCallOpen;
    return Step::kProgress;
  }
  size_t keep = final ? rest.size() : HeldSuffixStart(rest, {kCallOpen});
  AppendText(out, OutputEventKind::kContentDelta, rest.substr(0, keep));
  pos_ += keep;
  return Step::kNeedMore;
}

ToolCallParser::Step ToolCallParser::StepCallOpen(bool final, OutputEvents& out) {
  SkipWhitespace();
  std::string_view rest = Rest();
  if (rest.empty()) return Step::kNeedMore;
  if (options_.accept_json && rest.front() == '{') {
    state_ = State::kJsonBody;
    return Step::kProgress;
  }
  if (options_.accept_xml) {
    switch (MatchLiteral(kFunctionOpen, final)) {
      case Match::kYes:
        Consume(kFunctionOpen.size());
        state_ = State::kFunctionName;
        return Step::kProgress;
      case Match::kMaybe:
        return Step::kNeedMore;
      case Match::kNo:
        break;
    }
  }
  return Fail(out);
}

ToolCallParser::Step ToolCallParser::StepJsonBody(bool final, OutputEvents& out) {
  std::string_view rest = Rest();
  for (size_t i = 0; i < rest.size(); ++i) {
    char c = rest[i];
    json_text_.push_back(c);
    if (json_in_string_) {
      if (json_escape_) {
        json_escape_ = false;
      } else if (c == '\\') {
        json_escape_ = true;
      } else if (c == '"') {
        json_in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      json_in_string_ = true;
    } else if (c == '{' || c == '[') {
      // Deeper than any tool call needs: the parsed value could not be copied or dumped safely.
      if (++json_depth_ > kMaxJsonNesting) return Fail(out);
    } else if (c == '}' || c == ']') {
      if (--json_depth_ > 0) continue;
      Consume(i + 1);
      auto parsed = nlohmann::ordered_json::parse(json_text_, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) return Fail(out);
      auto name = parsed.find("name");
      if (name == parsed.end() || !name->is_string() || name->get<std::string>().empty()) {
        return Fail(out);
      }
      auto args = parsed.find("arguments");
      if (args == parsed.end()) args = parsed.find("parameters");
      if (args == parsed.end()) return Fail(out);
      nlohmann::ordered_json arguments = *args;
      if (arguments.is_string()) {
        const std::string& text = arguments.get_ref<const std::string&>();
        arguments = JsonNestingDepth(text) > kMaxJsonNesting
                        ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
                        : nlohmann::ordered_json::parse(text, nullptr, false);
      }
      if (arguments.is_discarded() || !arguments.is_object()) return Fail(out);
      name_ = name->get<std::string>();
      arguments_ = std::move(arguments);
      state_ = State::kAfterJson;
      return Step::kProgress;
    } else if (c == '<') {
      // Markup where JSON must continue: the object was never closed.
      return Fail(out);
    }
  }
  Consume(rest.size());
  (void)final;
  return Step::kNeedMore;
}

ToolCallParser::Step ToolCallParser::StepFunctionName(bool final, OutputEvents& out) {
  size_t length = 0;
  switch (ScanName(Rest(), /*function_name=*/true, final, length)) {
    case NameScan::kFound:
      name_ = std::string(Rest().substr(0, length));
      Consume(length + 1);
      properties_ = options_.schemas.Properties(name_);
      arguments_ = nlohmann::ordered_json::object();
      state_ = State::kFunctionBody;
      return Step::kProgress;
    case NameScan::kNeedMore:
      return Step::kNeedMore;
    case NameScan::kInvalid:
      break;
  }
  return Fail(out);
}

ToolCallParser::Step ToolCallParser::StepFunctionBody(bool final, OutputEvents& out) {
  SkipWhitespace();
  if (Rest().empty()) return Step::kNeedMore;
  Match parameter = MatchLiteral(kParameterOpen, final);
  Match function_close = MatchLiteral(kFunctionClose, final);
  Match call_close = MatchLiteral(kCallClose, final);
  if (parameter == Match::kYes) {
    Consume(kParameterOpen.size());
    state_ = State::kParameterName;
    return Step::kProgress;
  }
  if (function_close == Match::kYes) {
    Consume(kFunctionClose.size());
    state_ = State::kAfterFunction;
    return Step::kProgress;
  }
  if (call_close == Match::kYes) {  // </function> left out: accepted, as vLLM does
    Consume(kCallClose.size());
    return Complete(out);
  }
  if (parameter == Match::kMaybe || function_close == Match::kMaybe || call_close == Match::kMaybe) {
    return Step::kNeedMore;
  }
  return Fail(out);
}

ToolCallParser::Step ToolCallParser::StepParameterName(bool final, OutputEvents& out) {
  size_t length = 0;
  switch (ScanName(Rest(), /*function_name=*/false, final, length)) {
    case NameScan::kFound:
      parameter_name_ = std::string(Rest().substr(0, length));
      Consume(length + 1);
      state_ = State::kValueStart;
      return Step::kProgress;
    case NameScan::kNeedMore:
      return Step::kNeedMore;
    case NameScan::kInvalid:
      break;
  }
  return Fail(out);
}

ToolCallParser::Step ToolCallParser::StepValueStart(bool final, OutputEvents& out) {
  std::string_view rest = Rest();
  if (rest.empty()) return Step::kNeedMore;
  if (rest.front() == '\n') Consume(1);
  value_.clear();
  value_depth_ = 0;
  state_ = State::kValue;
  return Step::kProgress;
}

ToolCallParser::Step ToolCallParser::StepValue(bool final, OutputEvents& out) {
  std::string_view rest = Rest();
  size_t i = 0;
  while (true) {
    size_t lt = rest.find('<', i);
    if (lt == std::string_view::npos) {
      value_.append(rest);
      Consume(rest.size());
      return Step::kNeedMore;
    }
    std::string_view tail = rest.substr(lt);
    if (tail.starts_with(kParameterClose)) {
      if (value_depth_ > 0) {  // closes a nested literal block: value text
        --value_depth_;
        i = lt + kParameterClose.size();
        continue;
      }
      value_.append(rest.substr(0, lt));
      Consume(lt + kParameterClose.size());
      pending_close_ = kParameterClose;
      state_ = State::kAfterValueClose;
      return Step::kProgress;
    }
    bool line_start = lt > 0 ? rest[lt - 1] == '\n' : (value_.empty() || value_.back() == '\n');
    if (line_start && tail.starts_with(kParameterOpen)) {  // a nested literal block opens
      ++value_depth_;
      i = lt + kParameterOpen.size();
      continue;
    }
    if (!final && (IsProperPrefixOf(tail, kParameterClose) ||
                   (line_start && IsProperPrefixOf(tail, kParameterOpen)))) {
      value_.append(rest.substr(0, lt));
      Consume(lt);
      return Step::kNeedMore;
    }
    i = lt + 1;
  }
}

ToolCallParser::Step ToolCallParser::StepAfterValueClose(bool final, OutputEvents& out) {
  {
    std::string_view rest = Rest();
    size_t ws = 0;
    while (ws < rest.size() && IsWhitespace(rest[ws])) ++ws;
    pending_close_.append(rest.substr(0, ws));
    Consume(ws);
  }
  std::string_view rest = Rest();
  if (rest.empty()) return Step::kNeedMore;
  Match parameter = MatchLiteral(kParameterOpen, final);
  if (parameter == Match::kYes) {
    FinishParameter();
    Consume(kParameterOpen.size());
    state_ = State::kParameterName;
    return Step::kProgress;
  } else {
    Match function_close = MatchLiteral(kFunctionClose, final);
    Match call_close = MatchLiteral(kCallClose, final);
    if (function_close == Match::kYes) {
      FinishParameter();
      Consume(kFunctionClose.size());
      state_ = State::kAfterFunction;
      return Step::kProgress;
    }
    if (call_close == Match::kYes) {
      FinishParameter();
      Consume(kCallClose.size());
      return Complete(out);
    }
    if (parameter == Match::kMaybe || function_close == Match::kMaybe ||
        call_close == Match::kMaybe) {
      return Step::kNeedMore;
    }
  }
  // Not a closing tag after all: it and the whitespace after it are value text.
  value_.append(pending_close_);
  pending_close_.clear();
  state_ = State::kValue;
  return Step::kProgress;
}

// After the JSON object or </function>: whitespace, then </tool_call>.
ToolCallParser::Step ToolCallParser::StepCallClose(bool final, OutputEvents& out) {
  SkipWhitespace();
  if (Rest().empty()) return Step::kNeedMore;
  switch (MatchLiteral(kCallClose, final)) {
    case Match::kYes:
      Consume(kCallClose.size());
      return Complete(out);
    case Match::kMaybe:
      return Step::kNeedMore;
    case Match::kNo:
      break;
  }
  return Fail(out);
}

void ToolCallParser::FinishParameter() {
  std::string_view value = value_;
  if (value.ends_with('\n')) value.remove_suffix(1);
  const nlohmann::json* schema = nullptr;
  if (properties_ != nullptr) {
    auto it = properties_->find(parameter_name_);
    if (it != properties_->end()) schema = &*it;
  }
  arguments_[parameter_name_] = ConvertParameterValue(value, schema);
  value_.clear();
  pending_close_.clear();
}

}  // namespace sparkserve::text
