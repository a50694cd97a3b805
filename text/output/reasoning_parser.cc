// ReasoningParser: the <think> block state machine (see reasoning_parser.h for the rules).
#include "text/output/reasoning_parser.h"

#include "text/output/partial_tag.h"

namespace sparkserve::text {
namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

enum class Decision { kYes, kNo, kUndecided };

// Whether the text after a "<tool_call>" inside reasoning starts a real call ("<function=").
Decision StartsFunction(std::string_view after, bool final) {
  while (!after.empty() && IsWhitespace(after.front())) after.remove_prefix(1);
  if (after.starts_with(kFunctionOpen)) return Decision::kYes;
  if (!final && IsProperPrefixOf(after, kFunctionOpen)) return Decision::kUndecided;
  return Decision::kNo;
}
}  // namespace

ReasoningParser::ReasoningParser(ReasoningParserOptions options)
    : options_(options),
      state_(options.starts_in_reasoning ? State::kReasoning : State::kBeforeReasoning) {}

ReasoningParser::BlockScan ReasoningParser::ScanBlock(std::string_view text, bool final) const {
  size_t from = 0;
  while (true) {
    std::string_view rest = text.substr(from);
    TagMatch m = options_.tool_call_ends_reasoning
                     ? FindFirstTag(rest, {kThinkClose, kToolCallOpen})
                     : FindFirstTag(rest, {kThinkClose});
    if (!m.found()) {
      size_t keep = final ? rest.size()
                    : options_.tool_call_ends_reasoning
                        ? HeldSuffixStart(rest, {kThinkClose, kToolCallOpen})
                        : HeldSuffixStart(rest, {kThinkClose});
      return {.reasoning = from + keep, .consumed = from + keep, .ends = false};
    }
    size_t at = from + m.pos;
    if (m.tag == 0) return {.reasoning = at, .consumed = at + kThinkClose.size(), .ends = true};
    switch (StartsFunction(text.substr(at + kToolCallOpen.size()), final)) {
      case Decision::kYes:
        return {.reasoning = at, .consumed = at, .ends = true};
      case Decision::kUndecided:
        return {.reasoning = at, .consumed = at, .ends = false};
      case Decision::kNo:
        from = at + kToolCallOpen.size();  // a mention of the tag: reasoning text
        break;
    }
  }
}

void ReasoningParser::Feed(std::string_view piece, OutputEvents& out) {
  held_.append(piece);
  Run(/*final=*/false, out);
}

void ReasoningParser::Finish(OutputEvents& out) { Run(/*final=*/true, out); }

void ReasoningParser::Run(bool final, OutputEvents& out) {
  std::string_view text = held_;
  while (!text.empty()) {
    switch (state_) {
      case State::kAfterReasoning:
        AppendText(out, OutputEventKind::kContentDelta, text);
        text = {};
        break;
      case State::kBeforeReasoning: {
        TagMatch m = FindFirstTag(text, {kThinkOpen});
        if (m.found()) {
          AppendText(out, OutputEventKind::kContentDelta, text.substr(0, m.pos));
          text.remove_prefix(m.pos + kThinkOpen.size());
          state_ = State::kReasoning;
          at_output_start_ = false;
          break;
        }
        size_t keep = final ? text.size() : HeldSuffixStart(text, {kThinkOpen});
        AppendText(out, OutputEventKind::kContentDelta, text.substr(0, keep));
        if (keep > 0) at_output_start_ = false;
        text.remove_prefix(keep);
        held_ = std::string(text);
        return;
      }
      case State::kReasoning: {
        if (at_output_start_) {
          if (text.starts_with(kThinkOpen)) {
            text.remove_prefix(kThinkOpen.size());
            at_output_start_ = false;
            break;
          }
          if (!final && IsProperPrefixOf(text, kThinkOpen)) {
            held_ = std::string(text);
            return;
          }
          at_output_start_ = false;
        }
        BlockScan scan = ScanBlock(text, final);
        AppendText(out, OutputEventKind::kReasoningDelta, text.substr(0, scan.reasoning));
        text.remove_prefix(scan.consumed);
        if (scan.ends) {
          state_ = State::kAfterReasoning;
          break;
        }
        held_ = std::string(text);
        return;
      }
    }
  }
  held_.clear();
}

}  // namespace sparkserve::text
