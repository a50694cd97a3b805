// GrammarMatcher: one output's progress through a CompiledGrammar, token by token: which tokens
// may come next (a bitmask over the vocabulary), advancing over the sampled one, and rolling back
// (speculative decoding checks drafts by accepting them and rolls back the rejected ones).
//
//   GrammarMatcher m(compiled);
//   m.FillMask(words);               // bit v of words[v / 32]: token v may follow
//   if (m.CanEnd()) allow the stop tokens;
//   m.AcceptToken(sampled);          // false: not allowed (nothing changes)
//   if (m.IsTerminated()) the output is complete and nothing may follow
//
// Not thread-safe; the CompiledGrammar it reads is shared and thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "text/constraint/compiled_grammar.h"
#include "text/constraint/stack_stepper.h"

namespace sparkserve::text::constraint {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over token `id`'s bytes. False (state unchanged) when the grammar does not allow them
  // here, or the token has no text.
  bool AcceptToken(int32_t id);
  // Advances over bytes (all or nothing); one rollback step.
  bool AcceptBytes(std::string_view bytes);
  // Whether `bytes` could be accepted now (the state does not change).
  bool CanAccept(std::string_view bytes) const;

  // Tokens that may follow: words[v / 32] bit v % 32; `words` has vocab().mask_words() entries.
  // Stop tokens are not set (they have no text): allow them when CanEnd().
  void FillMask(std::span<uint32_t> words);
  // The text so far is a complete match.
  bool CanEnd() const { return complete_; }
  // Complete, and no byte may follow.
  bool IsTerminated() const { return tops_.empty(); }

  // Accept steps taken (tokens or byte strings), and undoing the last `steps` of them.
  int32_t num_steps() const { return static_cast<int32_t>(history_.size()); }
  void Rollback(int32_t steps);

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Saved {
    size_t tops_begin = 0;
    bool complete = false;
  };
  bool Advance(std::string_view bytes, std::vector<StackFrame>& tops, bool& complete) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  mutable NodeStore nodes_;
  std::vector<StackFrame> tops_;
  bool complete_ = false;
  std::vector<Saved> history_;          // state before each step
  std::vector<StackFrame> saved_tops_;  // the tops of those states, back to back
  std::vector<StackFrame> scratch_tops_;
};

}  // namespace sparkserve::text::constraint
