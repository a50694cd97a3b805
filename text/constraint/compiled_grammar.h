// CompiledGrammar: a grammar's automaton bound to a model's vocabulary, with the token-mask cache.
//
// For every position (rule, state) a stack top can be at, the tokens of the vocabulary fall in three
// sets, computed once (on first use, by one walk over the sorted vocabulary) and shared by every
// matcher of the grammar:
// - accepted: the token's bytes are read without leaving the rule the top is in (the frames
//   below cannot change that);
// - uncertain: reading it leaves that rule with bytes still to read whose next byte may follow
//   the rule (FOLLOW): the matcher checks these few against its real stack;
// - rejected: everything else.
// Positions that behave the same for max_token_bytes bytes share one entry (a long maxLength
// string has thousands of states but a few distinct entries).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "text/constraint/grammar.h"
#include "text/constraint/grammar_automaton.h"
#include "text/constraint/token_vocabulary.h"

namespace sparkserve::text::constraint {

struct PositionMask {
  std::vector<uint32_t> accepted_bits;  // [mask_words] when dense; else empty
  std::vector<int32_t> accepted_ids;    // when sparse
  std::vector<int32_t> uncertain;       // indices into the vocabulary's sorted order, ascending
  std::vector<int32_t> uncertain_shared;  // bytes each shares with the previous uncertain token
  size_t bytes() const {
    return accepted_bits.size() * 4 + accepted_ids.size() * 4 + uncertain.size() * 8;
  }
};

class CompiledGrammar {
 public:
  static absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar,
                                                                        std::shared_ptr<const TokenVocabulary> vocab,
                                                                        const AutomatonLimits& limits = {});

  const GrammarAutomaton& automaton() const { return automaton_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  const std::string& text() const { return text_; }  // the grammar's canonical text

  // The token sets of a position (automaton().position(rule, state)); thread-safe, computed on
  // first use.
  const PositionMask& MaskAt(int32_t position) const;
  // Computes every position's entry now (over `threads` threads; 0: the core thread pool);
  // returns how many distinct entries there are.
  int32_t PrecomputeAll() const;
  int32_t num_mask_classes() const { return num_classes_; }
  size_t cached_mask_bytes() const;

 private:
  CompiledGrammar() = default;
  std::unique_ptr<PositionMask> ComputeMask(int32_t position) const;

  GrammarAutomaton automaton_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::string text_;
  std::vector<int32_t> class_of_;       // [num_positions]
  std::vector<int32_t> representative_;  // [num_classes]: a position of the class
  int32_t num_classes_ = 0;
  mutable std::unique_ptr<std::once_flag[]> once_;
  mutable std::vector<std::unique_ptr<PositionMask>> masks_;  // [num_classes]
};

}  // namespace sparkserve::text::constraint
