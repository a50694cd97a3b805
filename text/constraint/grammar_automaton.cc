// Grammar -> per-rule byte DFAs with call edges (rule_dfa.h), trimming, left-recursion check,
// inlining of small rules, byte classes, FOLLOW sets.
#include "text/constraint/grammar_automaton.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "fmt/format.h"
#include "text/constraint/rule_dfa.h"

namespace sparkserve::text::constraint {
namespace {

// ---- trimming and checks over all rules' DFAs.

// Rules whose non-empty language is not empty, given the DFAs.
std::vector<bool> ProductiveRules(const std::vector<RuleDfa>& dfas) {
  std::vector<bool> productive(dfas.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < dfas.size(); ++r) {
      if (productive[r]) continue;
      const std::vector<DfaState>& st = dfas[r].states;
      std::vector<bool> seen(st.size(), false);
      std::vector<int32_t> stack{dfas[r].entry};
      seen[static_cast<size_t>(dfas[r].entry)] = true;
      while (!stack.empty() && !productive[r]) {
        const int32_t s = stack.back();
        stack.pop_back();
        if (st[static_cast<size_t>(s)].accepting) {
          productive[r] = true;
          changed = true;
          break;
        }
        auto visit = [&](int32_t t) {
          if (!seen[static_cast<size_t>(t)]) {
            seen[static_cast<size_t>(t)] = true;
            stack.push_back(t);
          }
        };
        for (const DfaRange& e : st[static_cast<size_t>(s)].ranges) visit(e.to);
        for (const CallEdge& c : st[static_cast<size_t>(s)].calls) {
          if (productive[static_cast<size_t>(c.rule)]) visit(c.ret);
        }
      }
    }
  }
  return productive;
}

// Removes the calls of rules that match nothing and every edge into a state that cannot reach the
// end of its rule.
void Trim(std::vector<RuleDfa>& dfas, const std::vector<bool>& productive) {
  for (RuleDfa& d : dfas) {
    const size_t n = d.states.size();
    for (DfaState& s : d.states) {
      std::erase_if(s.calls, [&](const CallEdge& c) { return !productive[static_cast<size_t>(c.rule)]; });
    }
    std::vector<std::vector<int32_t>> preds(n);
    for (size_t s = 0; s < n; ++s) {
      for (const DfaRange& e : d.states[s].ranges) preds[static_cast<size_t>(e.to)].push_back(static_cast<int32_t>(s));
      for (const CallEdge& c : d.states[s].calls) preds[static_cast<size_t>(c.ret)].push_back(static_cast<int32_t>(s));
    }
    std::vector<bool> live(n, false);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < n; ++s) {
      if (d.states[s].accepting) {
        live[s] = true;
        stack.push_back(static_cast<int32_t>(s));
      }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      for (int32_t p : preds[static_cast<size_t>(s)]) {
        if (!live[static_cast<size_t>(p)]) {
          live[static_cast<size_t>(p)] = true;
          stack.push_back(p);
        }
      }
    }
    for (DfaState& s : d.states) {
      std::erase_if(s.ranges, [&](const DfaRange& e) { return !live[static_cast<size_t>(e.to)]; });
      std::erase_if(s.calls, [&](const CallEdge& c) { return !live[static_cast<size_t>(c.ret)]; });
    }
  }
}

// A rule that can call itself (through calls made before any byte) would be expanded forever.
absl::Status CheckLeftRecursion(const std::vector<RuleDfa>& dfas, const Grammar& g) {
  const size_t n = dfas.size();
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t root = 0; root < n; ++root) {
    if (color[root]) continue;
    stack.push_back({static_cast<int32_t>(root), 0});
    color[root] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      const RuleDfa& d = dfas[static_cast<size_t>(r)];
      const std::vector<CallEdge>& calls = d.states[static_cast<size_t>(d.entry)].calls;
      if (next < calls.size()) {
        const int32_t q = calls[next++].rule;
        if (color[static_cast<size_t>(q)] == 1) {
          return absl::InvalidArgumentError(fmt::format(
              "rule '{}' is left-recursive (it can reach itself before reading any character); rewrite it "
              "with repetition", g.name(q)));
        }
        if (color[static_cast<size_t>(q)] == 0) {
          color[static_cast<size_t>(q)] = 1;
          stack.push_back({q, 0});
        }
      } else {
        color[static_cast<size_t>(r)] = 2;
        stack.pop_back();
      }
    }
  }
  return absl::OkStatus();
}

RuleAutomaton Finalize(const RuleDfa& d, std::string name, bool nullable) {
  RuleAutomaton a;
  a.name = std::move(name);
  a.start = d.start;
  a.entry = d.entry;
  a.nullable = nullable;
  // Byte classes: the elementary intervals of every range boundary in the rule.
  std::vector<bool> boundary(257, false);
  boundary[0] = boundary[256] = true;
  for (const DfaState& s : d.states) {
    for (const DfaRange& e : s.ranges) {
      boundary[e.lo] = true;
      boundary[static_cast<size_t>(e.hi) + 1] = true;
    }
  }
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (boundary[static_cast<size_t>(b)]) ++cls;
    a.byte_class[static_cast<size_t>(b)] = static_cast<uint8_t>(cls);
  }
  a.num_classes = cls + 1;
  const size_t n = d.states.size();
  a.next.assign(n * static_cast<size_t>(a.num_classes), -1);
  a.flags.assign(n, 0);
  a.call_begin.assign(n + 1, 0);
  for (size_t s = 0; s < n; ++s) {
    const DfaState& st = d.states[s];
    for (const DfaRange& e : st.ranges) {
      for (int c = a.byte_class[e.lo]; c <= a.byte_class[e.hi]; ++c) {
        a.next[s * static_cast<size_t>(a.num_classes) + static_cast<size_t>(c)] = e.to;
      }
    }
    uint8_t f = 0;
    if (st.accepting) f |= RuleAutomaton::kAccepting;
    if (!st.ranges.empty()) f |= RuleAutomaton::kHasBytes;
    if (!st.calls.empty()) f |= RuleAutomaton::kHasCalls;
    if (st.accepting && st.ranges.empty() && st.calls.empty()) f |= RuleAutomaton::kSink;
    a.flags[s] = f;
    a.calls.insert(a.calls.end(), st.calls.begin(), st.calls.end());
    a.call_begin[s + 1] = static_cast<int32_t>(a.calls.size());
  }
  return a;
}

using ByteSet = std::bitset<256>;

ByteSet StateFirst(const RuleAutomaton& a, int32_t s, const std::vector<ByteSet>& first) {
  ByteSet out;
  if (a.has_bytes(s)) {
    for (int b = 0; b < 256; ++b) {
      if (a.Next(s, static_cast<uint8_t>(b)) >= 0) out.set(static_cast<size_t>(b));
    }
  }
  for (int32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i) {
    out |= first[static_cast<size_t>(a.calls[static_cast<size_t>(i)].rule)];
  }
  return out;
}

// ---- inlining: a small rule that is not recursive is copied into its callers, so that tokens
// crossing its end are settled inside the caller's automaton rather than checked at run time.

constexpr int64_t kInlineMaxSize = 64;  // expression nodes (repetitions counted up to 16 copies)

int64_t InlineSize(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kEmpty:
    case Expr::Kind::kRuleRef:
    case Expr::Kind::kCharSet: return 1;
    case Expr::Kind::kLiteral: return 1 + static_cast<int64_t>(e.literal.size()) / 8;
    case Expr::Kind::kRepeat: return 1 + InlineSize(*e.items[0]) * std::min<int64_t>(e.max < 0 ? e.min + 1 : e.max, 16);
    default: {
      int64_t n = 1;
      for (const ExprPtr& i : e.items) n += InlineSize(*i);
      return n;
    }
  }
}

void CollectRefs(const Expr& e, std::vector<int32_t>& out) {
  if (e.kind == Expr::Kind::kRuleRef) out.push_back(e.rule);
  for (const ExprPtr& i : e.items) CollectRefs(*i, out);
}

class Inliner {
 public:
  explicit Inliner(const Grammar& g) : g_(g), inlinable_(static_cast<size_t>(g.num_rules()), false) {
    const size_t n = static_cast<size_t>(g.num_rules());
    std::vector<std::vector<int32_t>> refs(n);
    for (size_t r = 0; r < n; ++r) CollectRefs(*g.body(static_cast<int32_t>(r)), refs[r]);
    for (size_t r = 0; r < n; ++r) {  // recursive: r reaches itself
      std::vector<bool> seen(n, false);
      std::vector<int32_t> stack(refs[r].begin(), refs[r].end());
      bool recursive = false;
      while (!stack.empty() && !recursive) {
        const int32_t q = stack.back();
        stack.pop_back();
        if (static_cast<size_t>(q) == r) recursive = true;
        if (seen[static_cast<size_t>(q)]) continue;
        seen[static_cast<size_t>(q)] = true;
        stack.insert(stack.end(), refs[static_cast<size_t>(q)].begin(), refs[static_cast<size_t>(q)].end());
      }
      inlinable_[r] = !recursive && InlineSize(*g.body(static_cast<int32_t>(r))) <= kInlineMaxSize;
    }
  }

  ExprPtr Apply(const ExprPtr& e) {
    if (e->kind == Expr::Kind::kRuleRef) {
      return inlinable_[static_cast<size_t>(e->rule)] ? Apply(g_.body(e->rule)) : e;
    }
    if (e->items.empty()) return e;
    bool changed = false;
    std::vector<ExprPtr> items;
    for (const ExprPtr& i : e->items) {
      items.push_back(Apply(i));
      changed = changed || items.back() != i;
    }
    if (!changed) return e;
    Expr copy = *e;
    copy.items = std::move(items);
    return std::make_shared<const Expr>(std::move(copy));
  }

 private:
  const Grammar& g_;
  std::vector<bool> inlinable_;
};

}  // namespace

absl::StatusOr<GrammarAutomaton> GrammarAutomaton::Build(const Grammar& grammar, const AutomatonLimits& limits) {
  if (absl::Status s = grammar.Validate(); !s.ok()) return s;
  const size_t n = static_cast<size_t>(grammar.num_rules());
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (!nullable[r] && Nullable(*grammar.body(static_cast<int32_t>(r)), nullable)) {
        nullable[r] = true;
        changed = true;
      }
    }
  }
  std::vector<RuleDfa> dfas(n);
  int64_t total_states = 0;
  Inliner inliner(grammar);
  for (size_t r = 0; r < n; ++r) {
    RuleDfa& d = dfas[r];
    switch (BuildRuleDfa(*inliner.Apply(grammar.body(static_cast<int32_t>(r))), nullable, limits.max_nfa_states,
                         limits.max_dfa_states - total_states, &d)) {
      case RuleDfaBuild::kOk: break;
      case RuleDfaBuild::kNfaTooLarge:
        return absl::InvalidArgumentError(fmt::format(
            "rule '{}' is too large to compile (over {} states; lower the repetition counts or lengths)",
            grammar.name(static_cast<int32_t>(r)), limits.max_nfa_states));
      case RuleDfaBuild::kDfaTooLarge:
        return absl::InvalidArgumentError(fmt::format(
            "the grammar is too large to compile (over {} automaton states at rule '{}')", limits.max_dfa_states,
            grammar.name(static_cast<int32_t>(r))));
    }
    total_states += static_cast<int64_t>(d.states.size());
  }
  const std::vector<bool> productive = ProductiveRules(dfas);
  Trim(dfas, productive);
  const RuleDfa& root = dfas[static_cast<size_t>(grammar.root())];
  const DfaState& root_start = root.states[static_cast<size_t>(root.start)];
  if (!root_start.accepting && root_start.ranges.empty() && root_start.calls.empty()) {
    return absl::InvalidArgumentError("the grammar matches no text at all (it cannot be satisfied)");
  }
  if (absl::Status s = CheckLeftRecursion(dfas, grammar); !s.ok()) return s;

  GrammarAutomaton a;
  a.root_ = grammar.root();
  a.offsets_.push_back(0);
  for (size_t r = 0; r < n; ++r) {
    a.rules_.push_back(Finalize(dfas[r], grammar.name(static_cast<int32_t>(r)), nullable[r]));
    a.offsets_.push_back(a.offsets_.back() + a.rules_.back().num_states());
  }
  // FIRST (of each rule's non-empty language), then FOLLOW, to a fixed point.
  std::vector<ByteSet> first(n);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      const ByteSet f = StateFirst(a.rules_[r], a.rules_[r].entry, first);
      if (f != first[r]) {
        first[r] = f;
        changed = true;
      }
    }
  }
  a.follow_.assign(n, ByteSet());
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t p = 0; p < n; ++p) {
      const RuleAutomaton& rule = a.rules_[p];
      for (int32_t s = 0; s < rule.num_states(); ++s) {
        for (int32_t i = rule.call_begin[static_cast<size_t>(s)]; i < rule.call_begin[static_cast<size_t>(s) + 1]; ++i) {
          const CallEdge& c = rule.calls[static_cast<size_t>(i)];
          ByteSet f = StateFirst(rule, c.ret, first);
          if (rule.accepting(c.ret)) f |= a.follow_[p];
          ByteSet& into = a.follow_[static_cast<size_t>(c.rule)];
          if ((f | into) != into) {
            into |= f;
            changed = true;
          }
        }
      }
    }
  }
  return a;
}

std::vector<int32_t> GrammarAutomaton::PositionClasses(int32_t depth, int32_t* num_classes) const {
  const size_t total = static_cast<size_t>(num_positions());
  // Byte-class layouts and FOLLOW sets, as small ids.
  absl::flat_hash_map<std::string, int64_t> layouts, follows;
  std::vector<int64_t> layout_of(rules_.size()), follow_of(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    const auto& bc = rules_[r].byte_class;
    layout_of[r] = layouts.try_emplace(std::string(bc.begin(), bc.end()), static_cast<int64_t>(layouts.size())).first->second;
    follow_of[r] = follows.try_emplace(follow_[r].to_string(), static_cast<int64_t>(follows.size())).first->second;
  }
  std::vector<int32_t> cls(total, 0);
  int32_t count = 0;
  {
    absl::flat_hash_map<int64_t, int32_t> ids;
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (int32_t s = 0; s < rules_[r].num_states(); ++s) {
        const int64_t key = rules_[r].accepting(s) ? 1 + follow_of[r] : 0;
        cls[static_cast<size_t>(position(static_cast<int32_t>(r), s))] =
            ids.try_emplace(key, static_cast<int32_t>(ids.size())).first->second;
      }
    }
    count = static_cast<int32_t>(ids.size());
  }
  std::vector<int64_t> sig;
  for (int32_t round = 0; round < depth; ++round) {
    absl::flat_hash_map<std::vector<int64_t>, int32_t> ids;
    std::vector<int32_t> next(total);
    for (size_t r = 0; r < rules_.size(); ++r) {
      const RuleAutomaton& a = rules_[r];
      const int32_t base = offsets_[r];
      for (int32_t s = 0; s < a.num_states(); ++s) {
        sig.clear();
        sig.push_back(cls[static_cast<size_t>(base + s)]);
        sig.push_back(layout_of[r]);
        for (int32_t c = 0; c < a.num_classes; ++c) {
          const int32_t t = a.next[static_cast<size_t>(s) * static_cast<size_t>(a.num_classes) + static_cast<size_t>(c)];
          sig.push_back(t < 0 ? -1 : cls[static_cast<size_t>(base + t)]);
        }
        for (int32_t i = a.call_begin[static_cast<size_t>(s)]; i < a.call_begin[static_cast<size_t>(s) + 1]; ++i) {
          const CallEdge& e = a.calls[static_cast<size_t>(i)];
          sig.push_back(e.rule);
          // A tail call leaves nothing of the caller: only what follows the caller matters then.
          sig.push_back(a.sink(e.ret) ? -2 - follow_of[r] : cls[static_cast<size_t>(base + e.ret)]);
        }
        next[static_cast<size_t>(base + s)] = ids.try_emplace(sig, static_cast<int32_t>(ids.size())).first->second;
      }
    }
    const int32_t new_count = static_cast<int32_t>(ids.size());
    cls = std::move(next);
    if (new_count == count) break;  // stable: the exact equivalence
    count = new_count;
  }
  *num_classes = count;
  return cls;
}

}  // namespace sparkserve::text::constraint
