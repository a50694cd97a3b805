// GrammarMatcher: accepting tokens, masks from the cache plus a walk over the uncertain tokens,
// rollback.
#include "text/constraint/grammar_matcher.h"

#include <algorithm>

namespace sparkserve::text::constraint {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  const GrammarAutomaton& a = grammar_->automaton();
  StackStepper stepper(a, &nodes_, /*intern=*/true);
  complete_ = stepper.Expand({a.root(), a.rule(a.root()).start, kStackBottom}, tops_);
  DedupeTops(tops_, 0);
}

bool GrammarMatcher::Advance(std::string_view bytes, std::vector<StackFrame>& tops, bool& complete) const {
  if (bytes.empty()) return false;
  StackStepper stepper(grammar_->automaton(), &nodes_, /*intern=*/true);
  std::vector<StackFrame> next;
  for (size_t i = 0; i < bytes.size(); ++i) {
    next.clear();
    complete = stepper.Step(tops, static_cast<uint8_t>(bytes[i]), next);
    if (next.empty() && (i + 1 < bytes.size() || !complete)) return false;
    tops.swap(next);
  }
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  if (id < 0 || id >= grammar_->vocab().vocab_size()) return false;
  return AcceptBytes(grammar_->vocab().bytes(id));
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  std::vector<StackFrame> tops = tops_;
  bool complete = complete_;
  if (!Advance(bytes, tops, complete)) return false;
  history_.push_back({saved_tops_.size(), complete_});
  saved_tops_.insert(saved_tops_.end(), tops_.begin(), tops_.end());
  tops_ = std::move(tops);
  complete_ = complete;
  return true;
}

bool GrammarMatcher::CanAccept(std::string_view bytes) const {
  std::vector<StackFrame> tops = tops_;
  bool complete = complete_;
  return Advance(bytes, tops, complete);
}

void GrammarMatcher::Rollback(int32_t steps) {
  steps = std::clamp(steps, 0, num_steps());
  if (steps == 0) return;
  // saved_tops_ holds the tops of every saved state back to back.
  const size_t k = history_.size() - static_cast<size_t>(steps);  // the state to restore
  const size_t begin = history_[k].tops_begin;
  const size_t end = k + 1 < history_.size() ? history_[k + 1].tops_begin : saved_tops_.size();
  tops_.assign(saved_tops_.begin() + static_cast<std::ptrdiff_t>(begin),
               saved_tops_.begin() + static_cast<std::ptrdiff_t>(end));
  complete_ = history_[k].complete;
  saved_tops_.resize(begin);
  history_.resize(k);
}

void GrammarMatcher::FillMask(std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  const GrammarAutomaton& a = grammar_->automaton();
  const TokenVocabulary& v = grammar_->vocab();
  // tops_ is sorted by (rule, state, parent): the tops of one position are contiguous.
  for (size_t begin = 0; begin < tops_.size();) {
    size_t end = begin + 1;
    while (end < tops_.size() && tops_[end].rule == tops_[begin].rule && tops_[end].state == tops_[begin].state) ++end;
    const PositionMask& m = grammar_->MaskAt(a.position(tops_[begin].rule, tops_[begin].state));
    if (!m.accepted_bits.empty()) {
      for (size_t w = 0; w < words.size(); ++w) words[w] |= m.accepted_bits[w];
    } else {
      for (int32_t id : m.accepted_ids) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
    }
    if (!m.uncertain.empty()) {
      StackStepper stepper(a, &nodes_, /*intern=*/false);
      WalkSortedTokens(
          stepper, std::span<const StackFrame>(tops_.data() + begin, end - begin), static_cast<int32_t>(m.uncertain.size()),
          [&](int32_t i) { return v.bytes(v.sorted(m.uncertain[static_cast<size_t>(i)])); },
          [&](int32_t i) { return m.uncertain_shared[static_cast<size_t>(i)]; }, /*follow=*/nullptr,
          [&](int32_t i, bool ok, bool) {
            if (!ok) return;
            const int32_t id = v.sorted(m.uncertain[static_cast<size_t>(i)]);
            words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
          });
    }
    begin = end;
  }
}

}  // namespace sparkserve::text::constraint
