// GrammarCompiler: the compiled-grammar cache; choice grammars; leading white space.
#include "text/constraint/grammar_compiler.h"

namespace sparkserve::text::constraint {

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(1, capacity)) {}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(const Grammar& grammar) {
  std::string key = grammar.ToString();
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compiled outside the lock: two requests racing on a new grammar both compile it (rare, and
  // cheaper than serialising every compile).
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompiledGrammar::Compile(grammar, vocab_);
  if (!compiled.ok()) return compiled.status();
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second->second;
  lru_.emplace_front(key, *compiled);
  index_[std::move(key)] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return *compiled;
}

int64_t GrammarCompiler::hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

int64_t GrammarCompiler::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

size_t GrammarCompiler::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

absl::StatusOr<Grammar> ChoiceGrammar(const std::vector<std::string>& choices) {
  if (choices.empty()) return absl::InvalidArgumentError("the choice list is empty: no output can satisfy it");
  std::vector<ExprPtr> alts;
  for (const std::string& c : choices) alts.push_back(Literal(c));
  Grammar g;
  const int32_t root = g.AddRule("root");
  g.SetBody(root, Choice(std::move(alts)));
  g.set_root(root);
  return g;
}

Grammar WithLeadingWhitespace(Grammar g, int32_t max_bytes) {
  const int32_t old_root = g.root();
  const int32_t root = g.AddUniqueRule("root-after-reasoning");
  g.SetBody(root, Seq({Repeat(CharSet({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}}), 0, max_bytes), RuleRef(old_root)}));
  g.set_root(root);
  return g;
}

}  // namespace sparkserve::text::constraint
