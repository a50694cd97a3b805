// OutputMatcher: reasoning gate (marker search, KMP) in front of a GrammarMatcher.
#include "text/constraint/output_matcher.h"

#include <algorithm>

namespace sparkserve::text::constraint {

OutputMatcher::OutputMatcher(std::shared_ptr<const CompiledGrammar> grammar, std::string reasoning_end)
    : marker_(std::move(reasoning_end)), in_reasoning_(!marker_.empty()), grammar_(std::move(grammar)) {
  failure_.assign(marker_.size(), 0);
  for (size_t i = 1, k = 0; i < marker_.size(); ++i) {
    while (k > 0 && marker_[i] != marker_[k]) k = static_cast<size_t>(failure_[k - 1]);
    if (marker_[i] == marker_[k]) ++k;
    failure_[i] = static_cast<int32_t>(k);
  }
}

bool OutputMatcher::AcceptToken(int32_t id) {
  const Saved before{in_reasoning_, marker_matched_, grammar_.num_steps()};
  if (!in_reasoning_) {
    if (!grammar_.AcceptToken(id)) return false;
    history_.push_back(before);
    return true;
  }
  const std::string_view bytes = grammar_.grammar().vocab().bytes(id);
  size_t k = static_cast<size_t>(marker_matched_);
  for (size_t i = 0; i < bytes.size(); ++i) {
    while (k > 0 && bytes[i] != marker_[k]) k = static_cast<size_t>(failure_[k - 1]);
    if (bytes[i] == marker_[k]) ++k;
    if (k == marker_.size()) {
      in_reasoning_ = false;
      // The rest of the token starts the constrained output; text the grammar refuses is left
      // unconstrained (the token was sampled freely).
      if (i + 1 < bytes.size()) grammar_.AcceptBytes(bytes.substr(i + 1));
      k = 0;
      break;
    }
  }
  marker_matched_ = static_cast<int32_t>(k);
  history_.push_back(before);
  return true;
}

void OutputMatcher::Rollback(int32_t tokens) {
  tokens = std::clamp(tokens, 0, num_tokens());
  if (tokens == 0) return;
  const Saved s = history_[history_.size() - static_cast<size_t>(tokens)];
  grammar_.Rollback(grammar_.num_steps() - s.grammar_steps);
  in_reasoning_ = s.in_reasoning;
  marker_matched_ = s.marker_matched;
  history_.resize(history_.size() - static_cast<size_t>(tokens));
}

}  // namespace sparkserve::text::constraint
