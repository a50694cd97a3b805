// ReasoningParser: splits streamed model output into reasoning (<think>...</think>) and content.
//
// Rules (only the markup is removed; nothing else is trimmed, so the concatenation of all deltas
// is the input minus the recognised <think>/</think> tags, leading whitespace and U+FFFD kept):
// - starts_in_reasoning (the generation prompt ended with "<think>\n"): output begins as
//   reasoning; a "<think>" at the very start of the output is markup (some templates open the
//   block in the prompt and the model repeats the tag), anywhere else it is reasoning text.
// - otherwise output begins as content and the first "<think>" opens the reasoning block.
// - the first "</think>" inside the block closes it; after that everything is content, tags
//   included (there is one reasoning block per output; a "</think>" outside a block is text).
// - text that might begin a tag ("<", "</th", ...) is held until the next piece decides it;
//   Finish() releases what is still held as what it is (reasoning inside the block, else content).
// - tool_call_ends_reasoning: a "<tool_call>" followed (after whitespace) by "<function=" ends the
//   block implicitly; the call text itself is content. Qwen3.5 models sometimes call a tool
//   without closing </think> (vLLM's Qwen3 parser does the same); any other "<tool_call>" stays
//   reasoning text.
// The newline after <think> and the one before </think> belong to the reasoning text: vLLM's
// Qwen3 parser also keeps them (it partitions on the tags and strips nothing).
#pragma once
#include <string>
#include <string_view>

#include "text/output/output_event.h"

namespace sparkserve::text {

struct ReasoningParserOptions {
  bool starts_in_reasoning = false;
  bool tool_call_ends_reasoning = false;
};

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningParserOptions options = {});

  // Consumes the next detokenised piece; appends kReasoningDelta / kContentDelta events.
  void Feed(std::string_view piece, OutputEvents& out);
  // End of output: releases held text.
  void Finish(OutputEvents& out);

  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kBeforeReasoning, kReasoning, kAfterReasoning };
  void Run(bool final, OutputEvents& out);

  // Inside the block: the length of `text`'s prefix that is reasoning for sure, and whether the
  // block ends right there (at "</think>", consumed, or at an implicit-end "<tool_call>", kept).
  struct BlockScan {
    size_t reasoning = 0;
    size_t consumed = 0;
    bool ends = false;
  };
  BlockScan ScanBlock(std::string_view text, bool final) const;

  ReasoningParserOptions options_;
  State state_;
  bool at_output_start_ = true;  // nothing has been consumed yet
  std::string held_;             // text not yet decided (a possible tag prefix)
};

}  // namespace sparkserve::text
