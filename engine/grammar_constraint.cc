// GrammarConstraint: OutputMatcher behind the scheduler's ConstraintMatcher interface.
#include "engine/grammar_constraint.h"

#include "text/constraint/output_matcher.h"

namespace sparkserve::engine {
namespace {

class GrammarConstraintMatcher : public scheduler::ConstraintMatcher {
 public:
  GrammarConstraintMatcher(std::shared_ptr<const text::constraint::CompiledGrammar> grammar, std::string reasoning_end)
      : m_(std::move(grammar), std::move(reasoning_end)) {}
  bool active() const override { return m_.active(); }
  void FillMask(std::span<uint32_t> words) override { m_.FillMask(words); }
  bool CanEnd() const override { return m_.CanEnd(); }
  bool IsText(int32_t token) const override {
    const auto& v = m_.grammar().vocab();
    return token >= 0 && token < v.vocab_size() && !v.bytes(token).empty();
  }
  bool IsTerminated() const override { return m_.IsTerminated(); }
  bool Accept(int32_t token) override { return m_.AcceptToken(token); }
  int32_t num_tokens() const override { return m_.num_tokens(); }
  void Rollback(int32_t tokens) override { m_.Rollback(tokens); }

 private:
  text::constraint::OutputMatcher m_;
};

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const text::constraint::CompiledGrammar> grammar,
                                     std::string reasoning_end, std::string description)
    : grammar_(std::move(grammar)), reasoning_end_(std::move(reasoning_end)), description_(std::move(description)) {}

int32_t GrammarConstraint::vocab_size() const { return grammar_->vocab().vocab_size(); }

std::unique_ptr<scheduler::ConstraintMatcher> GrammarConstraint::NewMatcher() const {
  return std::make_unique<GrammarConstraintMatcher>(grammar_, reasoning_end_);
}

}  // namespace sparkserve::engine
