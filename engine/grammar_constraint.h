// GrammarConstraint: a compiled grammar (text/constraint) as a request's OutputConstraint. Each
// sample gets an OutputMatcher: free while a reasoning section is open (when `reasoning_end` is
// given, the prompt ended inside one), constrained from the end marker on.
#pragma once
#include <memory>
#include <string>

#include "scheduler/output_constraint.h"
#include "text/constraint/compiled_grammar.h"

namespace sparkserve::engine {

class GrammarConstraint : public scheduler::OutputConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const text::constraint::CompiledGrammar> grammar, std::string reasoning_end,
                    std::string description);

  int32_t vocab_size() const override;
  std::unique_ptr<scheduler::ConstraintMatcher> NewMatcher() const override;
  std::string Describe() const override { return description_; }

 private:
  std::shared_ptr<const text::constraint::CompiledGrammar> grammar_;
  std::string reasoning_end_;
  std::string description_;
};

}  // namespace sparkserve::engine
