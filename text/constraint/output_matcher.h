// OutputMatcher: a sample's constraint as the engine applies it. While a reasoning section is open
// (the prompt ended inside <think>) output is free; the grammar starts right after the end marker
// ("</think>"), with whatever bytes of that token follow the marker. Then it is a GrammarMatcher.
// Accepted tokens can be rolled back (speculative decoding).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "text/constraint/grammar_matcher.h"

namespace sparkserve::text::constraint {

class OutputMatcher {
 public:
  // `reasoning_end`: the marker that ends the free section; empty: constrained from the start.
  OutputMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::string reasoning_end);

  // Whether the grammar governs the next token (false while reasoning).
  bool active() const { return !in_reasoning_; }
  // Accepts a sampled token. While reasoning, always true (the marker is looked for); after, false
  // when the grammar does not allow it (nothing changes then).
  bool AcceptToken(int32_t id);
  // Grammar tokens allowed next (active() only); stop tokens are the caller's (CanEnd()).
  void FillMask(std::span<uint32_t> words) { grammar_.FillMask(words); }
  bool CanEnd() const { return !in_reasoning_ && grammar_.CanEnd(); }
  bool IsTerminated() const { return !in_reasoning_ && grammar_.IsTerminated(); }

  int32_t num_tokens() const { return static_cast<int32_t>(history_.size()); }
  // Undoes the last `tokens` accepted tokens.
  void Rollback(int32_t tokens);

  const CompiledGrammar& grammar() const { return grammar_.grammar(); }

 private:
  struct Saved {
    bool in_reasoning;
    int32_t marker_matched;
    int32_t grammar_steps;
  };
  std::string marker_;
  std::vector<int32_t> failure_;  // KMP failure function of marker_
  bool in_reasoning_;
  int32_t marker_matched_ = 0;    // bytes of the marker matched at the end of the output so far
  GrammarMatcher grammar_;
  std::vector<Saved> history_;
};

}  // namespace sparkserve::text::constraint
