// One grammar rule's body -> its byte DFA with call edges: a Thompson NFA (code points as UTF-8
// byte ranges, rule references as call edges), then subset construction. GrammarAutomaton builds
// every rule's DFA with this, then trims and links them (grammar_automaton.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "text/constraint/grammar.h"
#include "text/constraint/grammar_automaton.h"

namespace sparkserve::text::constraint {

struct DfaRange {
  uint8_t lo = 0, hi = 0;
  int32_t to = 0;
};
struct DfaState {
  std::vector<DfaRange> ranges;  // sorted, disjoint
  std::vector<CallEdge> calls;   // one per callee
  bool accepting = false;
};

struct RuleDfa {
  std::vector<DfaState> states;
  int32_t start = 0;
  int32_t entry = 0;
};

// Whether `e` matches the empty string, given which rules do.
bool Nullable(const Expr& e, const std::vector<bool>& rules);

enum class RuleDfaBuild { kOk, kNfaTooLarge, kDfaTooLarge };

// The DFA of one rule body into *out (state 0 the start; `entry` the start without its empty
// match when the start accepts). `nullable`: per rule. Fails past `max_nfa_states` NFA states or
// `dfa_budget` DFA states.
RuleDfaBuild BuildRuleDfa(const Expr& body, const std::vector<bool>& nullable, int64_t max_nfa_states,
                          int64_t dfa_budget, RuleDfa* out);

}  // namespace sparkserve::text::constraint
