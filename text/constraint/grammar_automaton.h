// GrammarAutomaton: a Grammar compiled for matching bytes. Every rule becomes a DFA over bytes
// whose states may also call another rule and continue at a return state when it ends (a
// recursive transition network); the matcher keeps a stack of such frames.
//
// Built so that the matcher's work stays bounded:
// - callers enter a rule at its non-empty entry (a nullable callee gets an epsilon bypass in the
//   caller instead), so expanding calls always reaches a byte before it can return;
// - left recursion is refused (it would push forever), naming the rule;
// - states that cannot reach the end of their rule, and calls of rules that match nothing, are
//   removed, so every state the matcher can be in still leads to a complete match;
// - a call whose return state is a sink (accepting, no way on) pushes no frame (tail calls), so
//   right recursion keeps the stack flat.
// FOLLOW sets (the bytes that may come right after a rule) let the token-mask cache settle most
// tokens that leave a rule without looking at the stack; small rules that are not recursive are
// inlined into their callers, so fewer tokens leave a rule at all.
#pragma once
#include <algorithm>
#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

struct CallEdge {
  int32_t rule = 0;  // the callee, entered at its `entry`
  int32_t ret = 0;   // the caller's state once the callee has ended
};

struct RuleAutomaton {
  enum Flag : uint8_t { kAccepting = 1, kHasBytes = 2, kSink = 4, kHasCalls = 8 };
  std::string name;
  int32_t start = 0;  // the rule's whole language (the root starts here)
  int32_t entry = 0;  // its language without "" (calls enter here; == start unless start accepts)
  bool nullable = false;
  int32_t num_classes = 0;
  std::array<uint8_t, 256> byte_class{};  // byte -> its column in `next`
  std::vector<int32_t> next;              // [num_states, num_classes]: the state after a byte, or -1
  std::vector<uint8_t> flags;             // [num_states] Flag bits
  std::vector<int32_t> call_begin;        // [num_states + 1]: the state's calls are calls[begin, end)
  std::vector<CallEdge> calls;

  int32_t num_states() const { return static_cast<int32_t>(flags.size()); }
  int32_t Next(int32_t state, uint8_t byte) const {
    return next[static_cast<size_t>(state) * static_cast<size_t>(num_classes) + byte_class[byte]];
  }
  bool accepting(int32_t state) const { return flags[static_cast<size_t>(state)] & kAccepting; }
  bool has_bytes(int32_t state) const { return flags[static_cast<size_t>(state)] & kHasBytes; }
  bool sink(int32_t state) const { return flags[static_cast<size_t>(state)] & kSink; }
  bool has_calls(int32_t state) const { return flags[static_cast<size_t>(state)] & kHasCalls; }
};

struct AutomatonLimits {
  int64_t max_nfa_states = 4'000'000;  // per rule, before determinisation
  int64_t max_dfa_states = 400'000;    // all rules together
};

class GrammarAutomaton {
 public:
  // InvalidArgument naming the problem: an undefined or left-recursive rule, a grammar that
  // matches nothing, or one past `limits` (too large to compile).
  static absl::StatusOr<GrammarAutomaton> Build(const Grammar& grammar, const AutomatonLimits& limits = {});

  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  const RuleAutomaton& rule(int32_t r) const { return rules_[static_cast<size_t>(r)]; }
  int32_t root() const { return root_; }
  // Bytes that may follow rule `r` (the end of the whole grammar is not a byte).
  const std::bitset<256>& follow(int32_t r) const { return follow_[static_cast<size_t>(r)]; }

  // (rule, state) pairs numbered 0 .. num_positions()-1.
  int32_t position(int32_t rule, int32_t state) const { return offsets_[static_cast<size_t>(rule)] + state; }
  int32_t num_positions() const { return offsets_.back(); }
  // The (rule, state) of a position.
  std::pair<int32_t, int32_t> Locate(int32_t position) const {
    const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), position);
    const int32_t rule = static_cast<int32_t>(it - offsets_.begin()) - 1;
    return {rule, position - offsets_[static_cast<size_t>(rule)]};
  }
  // Classes of positions that behave the same for every byte string of up to `depth` bytes (same
  // transitions, calls, ends and FOLLOW at the end): such positions allow the same tokens of up
  // to `depth` bytes, so the token-mask cache keeps one entry per class.
  std::vector<int32_t> PositionClasses(int32_t depth, int32_t* num_classes) const;

 private:
  std::vector<RuleAutomaton> rules_;
  std::vector<std::bitset<256>> follow_;
  std::vector<int32_t> offsets_;  // [num_rules + 1]
  int32_t root_ = 0;
};

}  // namespace sparkserve::text::constraint
