// OutputConstraint: what a request's output must match (structured outputs: a JSON schema, regex,
// choice or grammar), as the engine uses it: one ConstraintMatcher per sample that says which
// token ids may come next and advances over the sampled ones. The implementation works on the
// tokenizer's bytes (engine/grammar_constraint.h over text/constraint); the scheduler and the
// engine loop see only this interface.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace sparkserve::scheduler {

class ConstraintMatcher {
 public:
  virtual ~ConstraintMatcher() = default;
  // Whether the constraint governs the next token (false while a reasoning section is open).
  virtual bool active() const = 0;
  // The tokens allowed next: bit v % 32 of words[v / 32] (words: (vocab + 31) / 32 entries). Stop
  // tokens without text are not among them: the caller allows those when CanEnd().
  virtual void FillMask(std::span<uint32_t> words) = 0;
  // The output so far is complete: it may stop here.
  virtual bool CanEnd() const = 0;
  // Whether `token` is text to the constraint (false for special tokens such as the usual end of
  // text). A stop id that is text stays text: allowed where its text is, ending the output only
  // where the constraint can end.
  virtual bool IsText(int32_t token) const = 0;
  // Complete, and nothing may follow: the sample ends now.
  virtual bool IsTerminated() const = 0;
  // Advances over a sampled (or draft) token; false when the constraint does not allow it here
  // (nothing changes then).
  virtual bool Accept(int32_t token) = 0;
  // Tokens accepted so far, and undoing the last `tokens` of them (speculative decoding).
  virtual int32_t num_tokens() const = 0;
  virtual void Rollback(int32_t tokens) = 0;
};

class OutputConstraint {
 public:
  virtual ~OutputConstraint() = default;
  // The vocabulary size the masks cover (the model's).
  virtual int32_t vocab_size() const = 0;
  // A matcher at the start of the output (one per sample).
  virtual std::unique_ptr<ConstraintMatcher> NewMatcher() const = 0;
  // For logs: what kind of constraint.
  virtual std::string Describe() const = 0;
};

}  // namespace sparkserve::scheduler
