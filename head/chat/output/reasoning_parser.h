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
// The newline after <think> and the one before </think> belong to the reasoning text: vLLM's
// Qwen3 parser also keeps them (it partitions on the tags and strips nothing).
#pragma once
#include <string>
#include <string_view>

#include "head/chat/output/output_event.h"

namespace sparkserve::chat {

struct ReasoningParserOptions {
  bool starts_in_reasoning = false;
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

  State state_;
  bool at_output_start_ = true;  // nothing has been consumed yet
  std::string held_;             // text not yet decided (a possible tag prefix)
};

}  // namespace sparkserve::chat
