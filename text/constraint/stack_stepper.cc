// StackStepper: expansion (calls, returns) and the byte step over a set of stacks.
#include "text/constraint/stack_stepper.h"

#include <algorithm>

namespace sparkserve::text::constraint {

int32_t NodeStore::Intern(int32_t rule, int32_t state, int32_t parent) {
  auto [it, added] = ids_.try_emplace(std::make_tuple(rule, state, parent), static_cast<int32_t>(nodes_.size()));
  if (added) nodes_.push_back({rule, state, parent});
  return it->second;
}

int32_t StackStepper::Push(int32_t rule, int32_t state, int32_t parent) {
  if (intern_) return nodes_->Intern(rule, state, parent);
  scratch_.push_back({rule, state, parent});
  return -2 - static_cast<int32_t>(scratch_.size() - 1);
}

bool StackStepper::Expand(StackFrame frame, std::vector<StackFrame>& out) {
  bool bottom = false;
  work_.clear();
  work_.push_back(frame);
  while (!work_.empty()) {
    const StackFrame f = work_.back();
    work_.pop_back();
    const RuleAutomaton& a = g_.rule(f.rule);
    const uint8_t flags = a.flags[static_cast<size_t>(f.state)];
    if (flags & RuleAutomaton::kHasBytes) out.push_back(f);
    if (flags & RuleAutomaton::kHasCalls) {
      for (int32_t i = a.call_begin[static_cast<size_t>(f.state)]; i < a.call_begin[static_cast<size_t>(f.state) + 1]; ++i) {
        const CallEdge& c = a.calls[static_cast<size_t>(i)];
        // A call whose return state is a sink leaves nothing to do in the caller: no frame.
        const int32_t parent = a.sink(c.ret) ? f.parent : Push(f.rule, c.ret, f.parent);
        work_.push_back({c.rule, g_.rule(c.rule).entry, parent});
      }
    }
    if (flags & RuleAutomaton::kAccepting) {
      if (f.parent == kStackBottom) {
        bottom = true;
      } else {
        work_.push_back(Node(f.parent));
      }
    }
  }
  return bottom;
}

bool StackStepper::Step(std::span<const StackFrame> in, uint8_t byte, std::vector<StackFrame>& out) {
  const size_t begin = out.size();
  bool bottom = false;
  for (const StackFrame& f : in) {
    const int32_t t = g_.rule(f.rule).Next(f.state, byte);
    if (t < 0) continue;
    // Fast path: the next state only reads bytes.
    if (g_.rule(f.rule).flags[static_cast<size_t>(t)] == RuleAutomaton::kHasBytes) {
      out.push_back({f.rule, t, f.parent});
      continue;
    }
    bottom = Expand({f.rule, t, f.parent}, out) || bottom;
  }
  if (out.size() - begin > 1) DedupeTops(out, begin);
  return bottom;
}

void DedupeTops(std::vector<StackFrame>& tops, size_t begin) {
  std::sort(tops.begin() + static_cast<std::ptrdiff_t>(begin), tops.end());
  tops.erase(std::unique(tops.begin() + static_cast<std::ptrdiff_t>(begin), tops.end()), tops.end());
}

}  // namespace sparkserve::text::constraint
