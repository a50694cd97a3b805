// Helpers for the constraint tests: small vocabularies, compiling, and the brute-force mask (every
// token checked by advancing a copy of the matcher over its bytes) the cached masks must equal.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "text/constraint/compiled_grammar.h"
#include "text/constraint/gbnf_parser.h"
#include "text/constraint/grammar_matcher.h"
#include "text/constraint/token_vocabulary.h"

namespace sparkserve::text::constraint {

// Every single byte (ids 0..255), then `extra` random tokens of 2..max_len pieces drawn from
// pieces that matter to JSON and grammars (punctuation runs, quotes with text, escapes, digits,
// multi-byte UTF-8), then 3 ids with no text (special tokens).
inline std::shared_ptr<const TokenVocabulary> TestVocabulary(int extra = 600, int max_len = 5, uint64_t seed = 7) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> pieces{"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "  ", "\\", "\\n", "\\\"", "\\u00",
                                        "a", "b", "ab", "name", "age", "true", "false", "null", "0", "1", "2", "9", "12",
                                        "-", ".", "e", "é", "中", "\xF0\x9F\x98\x80", "x", "yz", "<", ">", "/", "=", "ok"};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < extra; ++i) {
    std::string t;
    const int n = 2 + static_cast<int>(rng() % static_cast<uint64_t>(max_len - 1));
    for (int k = 0; k < n; ++k) t += pieces[rng() % pieces.size()];
    tokens.push_back(t);
  }
  tokens.insert(tokens.end(), 3, std::string());
  const auto size = static_cast<int32_t>(tokens.size());
  return TokenVocabulary::Create(std::move(tokens), size);
}

inline std::shared_ptr<const CompiledGrammar> MustCompile(const Grammar& g, std::shared_ptr<const TokenVocabulary> v) {
  auto c = CompiledGrammar::Compile(g, std::move(v));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

inline std::shared_ptr<const CompiledGrammar> MustCompileGbnf(const std::string& text, std::shared_ptr<const TokenVocabulary> v) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? MustCompile(*g, std::move(v)) : nullptr;
}

// Whether the whole string matches: accepted byte by byte and complete at the end.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  if (text.empty()) return m.CanEnd();
  return m.AcceptBytes(text) && m.CanEnd();
}

inline bool Bit(const std::vector<uint32_t>& words, int32_t id) { return (words[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u; }

// The mask by brute force: token t allowed iff the matcher can accept its bytes.
inline std::vector<uint32_t> BruteForceMask(const GrammarMatcher& m) {
  const TokenVocabulary& v = m.grammar().vocab();
  std::vector<uint32_t> words(static_cast<size_t>(v.mask_words()), 0);
  for (int32_t id = 0; id < v.vocab_size(); ++id) {
    if (!v.bytes(id).empty() && m.CanAccept(v.bytes(id))) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  return words;
}

// Random walks through the grammar: at every step the cached mask must equal the brute-force one,
// then a random allowed token is taken. Returns the texts produced (complete or cut at max_steps).
inline std::vector<std::string> CheckMasksOnRandomWalks(const std::shared_ptr<const CompiledGrammar>& g, int walks,
                                                        int max_steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> texts;
  const TokenVocabulary& v = g->vocab();
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    std::string text;
    for (int step = 0; step < max_steps && !m.IsTerminated(); ++step) {
      std::vector<uint32_t> mask(static_cast<size_t>(v.mask_words()));
      m.FillMask(mask);
      const std::vector<uint32_t> expected = BruteForceMask(m);
      EXPECT_EQ(mask, expected) << "walk " << w << " step " << step << " after '" << text << "'";
      if (mask != expected) return texts;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.vocab_size(); ++id) {
        if (Bit(mask, id)) allowed.push_back(id);
      }
      if (allowed.empty() || (m.CanEnd() && rng() % 8 == 0)) break;
      const int32_t id = allowed[rng() % allowed.size()];
      EXPECT_TRUE(m.AcceptToken(id));
      text += v.bytes(id);
    }
    texts.push_back(text);
  }
  return texts;
}

}  // namespace sparkserve::text::constraint
