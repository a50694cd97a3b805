// ReasoningParser: the <think> block state machine (see reasoning_parser.h for the rules).
#include "head/chat/output/reasoning_parser.h"

#include "head/chat/output/partial_tag.h"

namespace sparkserve::chat {
namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
}  // namespace

ReasoningParser::ReasoningParser(ReasoningParserOptions options)
    : state_(options.starts_in_reasoning ? State::kReasoning : State::kBeforeReasoning) {}

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
        TagMatch m = FindFirstTag(text, {kThinkClose});
        if (m.found()) {
          AppendText(out, OutputEventKind::kReasoningDelta, text.substr(0, m.pos));
          text.remove_prefix(m.pos + kThinkClose.size());
          state_ = State::kAfterReasoning;
          break;
        }
        size_t keep = final ? text.size() : HeldSuffixStart(text, {kThinkClose});
        AppendText(out, OutputEventKind::kReasoningDelta, text.substr(0, keep));
        text.remove_prefix(keep);
        held_ = std::string(text);
        return;
      }
    }
  }
  held_.clear();
}

}  // namespace sparkserve::chat
