// One rule body -> byte DFA (see rule_dfa.h): Thompson NFA, then subset construction.
#include "text/constraint/rule_dfa.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"

namespace sparkserve::text::constraint {
namespace {

// ---- code points -> UTF-8 byte-range sequences (each code point range as a few sequences of
// per-byte ranges, so that every sequence is exactly a product of byte ranges).

struct ByteRange {
  uint8_t lo = 0, hi = 0;
};
using Utf8Seq = std::vector<ByteRange>;

void SplitUtf8(uint32_t lo, uint32_t hi, std::vector<Utf8Seq>& out) {
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      SplitUtf8(lo, max, out);
      SplitUtf8(max + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({ByteRange{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8(lo, lo | m, out);
        SplitUtf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8(lo, (hi & ~m) - 1, out);
        SplitUtf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, a);
  AppendUtf8(hi, b);
  Utf8Seq seq;
  for (size_t j = 0; j < a.size(); ++j) {
    seq.push_back({static_cast<uint8_t>(a[j]), static_cast<uint8_t>(b[j])});
  }
  out.push_back(std::move(seq));
}

// ---- Thompson NFA of one rule body.

struct Nfa {
  struct ByteEdge {
    uint8_t lo = 0, hi = 0;
    int32_t to = 0;
  };
  std::vector<std::vector<ByteEdge>> bytes;
  std::vector<std::vector<int32_t>> eps;
  std::vector<std::vector<CallEdge>> calls;  // {callee, state after it}

  int32_t New() {
    bytes.emplace_back();
    eps.emplace_back();
    calls.emplace_back();
    return static_cast<int32_t>(bytes.size()) - 1;
  }
};

class NfaBuilder {
 public:
  NfaBuilder(Nfa& nfa, const std::vector<bool>& nullable, int64_t limit) : nfa_(nfa), nullable_(nullable), limit_(limit) {}

  // Adds `e` starting at `from`; returns the state where it ends.
  int32_t Build(const Expr& e, int32_t from) {
    if (too_large_) return from;
    if (static_cast<int64_t>(nfa_.bytes.size()) > limit_) {
      too_large_ = true;
      return from;
    }
    switch (e.kind) {
      case Expr::Kind::kEmpty: return from;
      case Expr::Kind::kLiteral: {
        int32_t s = from;
        for (unsigned char c : e.literal) {
          const int32_t t = nfa_.New();
          nfa_.bytes[static_cast<size_t>(s)].push_back({c, c, t});
          s = t;
        }
        return s;
      }
      case Expr::Kind::kCharSet: {
        const int32_t end = nfa_.New();
        std::vector<Utf8Seq> seqs;
        for (const CodepointRange& r : e.ranges) SplitUtf8(r.lo, r.hi, seqs);
        for (const Utf8Seq& seq : seqs) {
          int32_t s = from;
          for (size_t j = 0; j < seq.size(); ++j) {
            const int32_t t = j + 1 == seq.size() ? end : nfa_.New();
            nfa_.bytes[static_cast<size_t>(s)].push_back({seq[j].lo, seq[j].hi, t});
            s = t;
          }
        }
        return end;
      }
      case Expr::Kind::kSequence: {
        int32_t s = from;
        for (const ExprPtr& item : e.items) s = Build(*item, s);
        return s;
      }
      case Expr::Kind::kChoice: {
        const int32_t end = nfa_.New();
        for (const ExprPtr& item : e.items) {
          const int32_t s = nfa_.New();
          nfa_.eps[static_cast<size_t>(from)].push_back(s);
          const int32_t t = Build(*item, s);
          nfa_.eps[static_cast<size_t>(t)].push_back(end);
        }
        return end;
      }
      case Expr::Kind::kRepeat: {
        const Expr& item = *e.items[0];
        int32_t s = from;
        for (int32_t i = 0; i < e.min && !too_large_; ++i) s = Build(item, s);
        if (e.max < 0) {
          const int32_t loop = nfa_.New();
          nfa_.eps[static_cast<size_t>(s)].push_back(loop);
          const int32_t t = Build(item, loop);
          nfa_.eps[static_cast<size_t>(t)].push_back(loop);
          return loop;
        }
        const int32_t end = nfa_.New();
        for (int32_t i = e.min; i < e.max && !too_large_; ++i) {
          nfa_.eps[static_cast<size_t>(s)].push_back(end);
          s = Build(item, s);
        }
        nfa_.eps[static_cast<size_t>(s)].push_back(end);
        return end;
      }
      case Expr::Kind::kRuleRef: {
        const int32_t t = nfa_.New();
        nfa_.calls[static_cast<size_t>(from)].push_back({e.rule, t});
        if (nullable_[static_cast<size_t>(e.rule)]) nfa_.eps[static_cast<size_t>(from)].push_back(t);
        return t;
      }
    }
    return from;
  }

  bool too_large() const { return too_large_; }

 private:
  Nfa& nfa_;
  const std::vector<bool>& nullable_;
  int64_t limit_;
  bool too_large_ = false;
};

// ---- subset construction.

class SubsetBuilder {
 public:
  SubsetBuilder(const Nfa& nfa, int32_t final_state) : nfa_(nfa), final_(final_state), mark_(nfa.bytes.size(), 0) {}

  // Determinises from `start`; false when more than `budget` states would be needed.
  bool Run(int32_t start, int64_t budget, std::vector<DfaState>& out) {
    std::vector<int32_t> seed{start};
    Intern(Closure(seed), out);
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int64_t>(out.size()) > budget) return false;
      std::vector<int32_t> members = sets_[i];
      // Byte transitions, by elementary interval of the members' edge ranges.
      std::vector<const Nfa::ByteEdge*> edges;
      std::vector<int> points;
      for (int32_t s : members) {
        for (const Nfa::ByteEdge& e : nfa_.bytes[static_cast<size_t>(s)]) {
          edges.push_back(&e);
          points.push_back(e.lo);
          points.push_back(e.hi + 1);
        }
      }
      std::sort(points.begin(), points.end());
      points.erase(std::unique(points.begin(), points.end()), points.end());
      std::vector<DfaRange> ranges;
      for (size_t k = 0; k + 1 < points.size(); ++k) {
        const int lo = points[k], hi = points[k + 1] - 1;
        std::vector<int32_t> targets;
        for (const Nfa::ByteEdge* e : edges) {
          if (e->lo <= lo && hi <= e->hi) targets.push_back(e->to);
        }
        if (targets.empty()) continue;
        const int32_t to = Intern(Closure(targets), out);
        if (!ranges.empty() && ranges.back().to == to && ranges.back().hi + 1 == lo) {
          ranges.back().hi = static_cast<uint8_t>(hi);
        } else {
          ranges.push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to});
        }
      }
      // Calls, one per callee.
      std::map<int32_t, std::vector<int32_t>> by_callee;
      for (int32_t s : members) {
        for (const CallEdge& c : nfa_.calls[static_cast<size_t>(s)]) by_callee[c.rule].push_back(c.ret);
      }
      std::vector<CallEdge> calls;
      for (auto& [callee, rets] : by_callee) calls.push_back({callee, Intern(Closure(rets), out)});
      const bool accepting = std::binary_search(members.begin(), members.end(), final_);
      out[i].ranges = std::move(ranges);
      out[i].calls = std::move(calls);
      out[i].accepting = accepting;
    }
    return static_cast<int64_t>(out.size()) <= budget;
  }

 private:
  std::vector<int32_t> Closure(const std::vector<int32_t>& seeds) {
    ++stamp_;
    std::vector<int32_t> stack, out;
    for (int32_t s : seeds) {
      if (mark_[static_cast<size_t>(s)] != stamp_) {
        mark_[static_cast<size_t>(s)] = stamp_;
        stack.push_back(s);
      }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      out.push_back(s);
      for (int32_t t : nfa_.eps[static_cast<size_t>(s)]) {
        if (mark_[static_cast<size_t>(t)] != stamp_) {
          mark_[static_cast<size_t>(t)] = stamp_;
          stack.push_back(t);
        }
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  int32_t Intern(std::vector<int32_t> set, std::vector<DfaState>& out) {
    auto [it, added] = ids_.try_emplace(set, static_cast<int32_t>(sets_.size()));
    if (added) {
      sets_.push_back(std::move(set));
      out.emplace_back();
    }
    return it->second;
  }

  const Nfa& nfa_;
  int32_t final_;
  std::vector<uint32_t> mark_;
  uint32_t stamp_ = 0;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::vector<int32_t>> sets_;
};

}  // namespace

bool Nullable(const Expr& e, const std::vector<bool>& rules) {
  switch (e.kind) {
    case Expr::Kind::kEmpty: return true;
    case Expr::Kind::kLiteral:
    case Expr::Kind::kCharSet: return false;
    case Expr::Kind::kSequence:
      return std::all_of(e.items.begin(), e.items.end(), [&](const ExprPtr& i) { return Nullable(*i, rules); });
    case Expr::Kind::kChoice:
      return std::any_of(e.items.begin(), e.items.end(), [&](const ExprPtr& i) { return Nullable(*i, rules); });
    case Expr::Kind::kRepeat: return e.min == 0 || Nullable(*e.items[0], rules);
    case Expr::Kind::kRuleRef: return rules[static_cast<size_t>(e.rule)];
  }
  return false;
}

RuleDfaBuild BuildRuleDfa(const Expr& body, const std::vector<bool>& nullable, int64_t max_nfa_states,
                          int64_t dfa_budget, RuleDfa* out) {
  Nfa nfa;
  const int32_t start = nfa.New();
  NfaBuilder builder(nfa, nullable, max_nfa_states);
  const int32_t final_state = builder.Build(body, start);
  if (builder.too_large()) return RuleDfaBuild::kNfaTooLarge;
  SubsetBuilder subsets(nfa, final_state);
  RuleDfa& d = *out;
  if (!subsets.Run(start, dfa_budget, d.states)) return RuleDfaBuild::kDfaTooLarge;
  d.start = 0;
  d.entry = 0;
  if (d.states[0].accepting) {  // the non-empty entry: the start's transitions without its end
    DfaState copy = d.states[0];
    copy.accepting = false;
    d.states.push_back(std::move(copy));
    d.entry = static_cast<int32_t>(d.states.size()) - 1;
  }
  return RuleDfaBuild::kOk;
}

}  // namespace sparkserve::text::constraint
