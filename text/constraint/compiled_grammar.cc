// CompiledGrammar: automaton + vocabulary + the per-position token sets.
#include "text/constraint/compiled_grammar.h"

#include <limits>

#include "core/thread_pool.h"
#include "text/constraint/stack_stepper.h"

namespace sparkserve::text::constraint {

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab, const AutomatonLimits& limits) {
  auto automaton = GrammarAutomaton::Build(grammar, limits);
  if (!automaton.ok()) return automaton.status();
  auto g = std::shared_ptr<CompiledGrammar>(new CompiledGrammar());
  g->automaton_ = std::move(*automaton);
  g->vocab_ = std::move(vocab);
  g->text_ = grammar.ToString();
  g->class_of_ = g->automaton_.PositionClasses(std::max(1, g->vocab_->max_token_bytes()), &g->num_classes_);
  g->representative_.assign(static_cast<size_t>(g->num_classes_), -1);
  for (int32_t p = 0; p < g->automaton_.num_positions(); ++p) {
    int32_t& rep = g->representative_[static_cast<size_t>(g->class_of_[static_cast<size_t>(p)])];
    if (rep < 0) rep = p;
  }
  g->once_ = std::make_unique<std::once_flag[]>(static_cast<size_t>(g->num_classes_));
  g->masks_.resize(static_cast<size_t>(g->num_classes_));
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

const PositionMask& CompiledGrammar::MaskAt(int32_t position) const {
  const int32_t cls = class_of_[static_cast<size_t>(position)];
  std::call_once(once_[static_cast<size_t>(cls)],
                 [&] { masks_[static_cast<size_t>(cls)] = ComputeMask(representative_[static_cast<size_t>(cls)]); });
  return *masks_[static_cast<size_t>(cls)];
}

int32_t CompiledGrammar::PrecomputeAll() const {
  std::vector<int32_t> positions;
  for (int32_t c = 0; c < num_classes_; ++c) {
    const int32_t p = representative_[static_cast<size_t>(c)];
    // Only states with byte edges are ever the top of a stack.
    const auto [rule, state] = automaton_.Locate(p);
    if (automaton_.rule(rule).has_bytes(state)) positions.push_back(p);
  }
  core::ThreadPool::Global().ParallelFor(static_cast<int64_t>(positions.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) MaskAt(positions[static_cast<size_t>(i)]);
  });
  return static_cast<int32_t>(positions.size());
}

size_t CompiledGrammar::cached_mask_bytes() const {
  size_t total = 0;
  for (int32_t c = 0; c < num_classes_; ++c) {
    // Entries are written once under call_once; reading a finished one is safe, a missing one is 0.
    if (masks_[static_cast<size_t>(c)]) total += masks_[static_cast<size_t>(c)]->bytes();
  }
  return total;
}

std::unique_ptr<PositionMask> CompiledGrammar::ComputeMask(int32_t position) const {
  const auto [rule, state] = automaton_.Locate(position);
  const TokenVocabulary& v = *vocab_;
  auto mask = std::make_unique<PositionMask>();
  std::vector<uint32_t> bits(static_cast<size_t>(v.mask_words()), 0);
  int64_t accepted = 0;
  int32_t shared_since = std::numeric_limits<int32_t>::max();
  NodeStore none;
  StackStepper stepper(automaton_, &none, /*intern=*/false);
  const StackFrame start{rule, state, kStackBottom};
  WalkSortedTokens(
      stepper, std::span<const StackFrame>(&start, 1), v.num_sorted(), [&](int32_t i) { return v.bytes(v.sorted(i)); },
      [&](int32_t i) { return v.lcp(i); }, &automaton_.follow(rule), [&](int32_t i, bool ok, bool uncertain) {
        shared_since = std::min(shared_since, i == 0 ? 0 : v.lcp(i));
        if (ok) {
          const int32_t id = v.sorted(i);
          bits[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
          ++accepted;
        } else if (uncertain) {
          mask->uncertain.push_back(i);
          mask->uncertain_shared.push_back(mask->uncertain.size() == 1 ? 0 : shared_since);
          shared_since = std::numeric_limits<int32_t>::max();
        }
      });
  if (accepted > static_cast<int64_t>(bits.size())) {
    mask->accepted_bits = std::move(bits);
  } else {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint32_t word = bits[w]; word != 0; word &= word - 1) {
        mask->accepted_ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word))));
      }
    }
  }
  return mask;
}

}  // namespace sparkserve::text::constraint
