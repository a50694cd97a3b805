// GrammarCompiler: compiles grammars against one vocabulary and keeps the results, keyed by the
// grammar's canonical text, so that requests repeating a schema or grammar reuse the automaton and
// every token mask computed so far. Least recently used entries are dropped past `capacity`.
// Thread-safe.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "text/constraint/compiled_grammar.h"
#include "text/constraint/grammar.h"
#include "text/constraint/token_vocabulary.h"

namespace sparkserve::text::constraint {

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 64);

  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar);

  const std::shared_ptr<const TokenVocabulary>& vocab() const { return vocab_; }
  int64_t hits() const;
  int64_t misses() const;
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  std::shared_ptr<const TokenVocabulary> vocab_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  int64_t hits_ = 0, misses_ = 0;
};

// One of the given strings, exactly (vLLM's guided_choice). InvalidArgument when empty.
absl::StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices);
// `g` with up to `max_bytes` of white space (space, tab, newline) allowed before it: for output
// that follows a reasoning section ("</think>\n\n{...}").
Grammar WithLeadingWhitespace(Grammar g, int32_t max_bytes);

}  // namespace sparkserve::text::constraint
