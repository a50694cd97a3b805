// Token masks: the cached per-position sets plus the walk over uncertain tokens must equal the
// brute-force mask (every token tried on the matcher) at every step of random walks, for grammars
// with recursion, rule ends inside tokens, UTF-8 and long bounded repetitions.
#include <string>

#include "constraint_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "text/constraint/grammar_compiler.h"
#include "text/constraint/json_schema_grammar.h"
#include "text/constraint/regex_parser.h"
#include "text/tokenizer/tokenizer.h"

namespace sparkserve::text::constraint {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> Schema(const char* schema, std::shared_ptr<const TokenVocabulary> v) {
  auto g = JsonSchemaGrammar(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? MustCompile(*g, std::move(v)) : nullptr;
}

TEST(Masks, RecursiveGrammarMatchesBruteForce) {
  auto g = MustCompileGbnf(R"(root ::= value
value ::= "[" ( value ("," value)* )? "]" | "{" ( pair ("," pair)* )? "}" | str | [0-9]+
pair ::= str ":" value
str ::= "\"" [a-z ]{0,3} "\""
)", TestVocabulary());
  ASSERT_NE(g, nullptr);
  CheckMasksOnRandomWalks(g, 30, 25, 1);
}

TEST(Masks, JsonSchemaMatchesBruteForce) {
  auto g = Schema(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": -5, "maximum": 120},
      "tags": {"type": "array", "items": {"enum": ["a", "b", null]}, "maxItems": 3},
      "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
      "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5}},
      "required": ["name", "age"]})",
                  TestVocabulary());
  ASSERT_NE(g, nullptr);
  CheckMasksOnRandomWalks(g, 30, 40, 2);
}

TEST(Masks, GenericJsonObjectMatchesBruteForce) {
  auto g = MustCompile(JsonObjectGrammar(), TestVocabulary());
  ASSERT_NE(g, nullptr);
  CheckMasksOnRandomWalks(g, 30, 30, 3);
}

TEST(Masks, RegexWithUtf8MatchesBruteForce) {
  auto g = MustCompile(*RegexGrammar("(é|中|[a-c]){1,4}-[^a-z]{2}\\d?"), TestVocabulary());
  ASSERT_NE(g, nullptr);
  CheckMasksOnRandomWalks(g, 40, 12, 4);
}

TEST(Masks, SpecialTokensAreNeverInTheMask) {
  auto v = TestVocabulary(100);
  auto g = MustCompile(*RegexGrammar("(.|\\n)*"), v);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(static_cast<size_t>(v->mask_words()));
  m.FillMask(mask);
  for (int32_t id = v->vocab_size() - 3; id < v->vocab_size(); ++id) EXPECT_FALSE(Bit(mask, id)) << id;
  // Lone UTF-8 continuation bytes cannot start text, but a lead byte can.
  EXPECT_FALSE(Bit(mask, 0x80));
  EXPECT_TRUE(Bit(mask, 0xC3));
  EXPECT_TRUE(Bit(mask, 'a'));
}

TEST(Masks, LongBoundedStringsShareCacheEntries) {
  auto v = TestVocabulary(300, 5);
  auto g = Schema(R"({"type": "object", "properties": {"text": {"type": "string", "maxLength": 3000}}, "required": ["text"]})", v);
  ASSERT_NE(g, nullptr);
  // Thousands of states, but positions further than the longest token from the end look alike.
  EXPECT_GT(g->automaton().num_positions(), 3000);
  EXPECT_LT(g->num_mask_classes(), 2 * v->max_token_bytes() * 8 + 200);
  // And the shared entries are still exact near the end of the string.
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("{\"text\": \"" + std::string(2996, 'a')));
  std::vector<uint32_t> mask(static_cast<size_t>(v->mask_words()));
  m.FillMask(mask);
  EXPECT_EQ(mask, BruteForceMask(m));
  ASSERT_TRUE(m.AcceptBytes("aaaa"));
  m.FillMask(mask);
  EXPECT_EQ(mask, BruteForceMask(m));
  EXPECT_TRUE(Bit(mask, '"'));
  EXPECT_FALSE(Bit(mask, 'a'));
}

TEST(Masks, PrecomputeAllThenMasksUnchanged) {
  auto v = TestVocabulary(200);
  auto g = Schema(R"({"type": "array", "items": {"type": "string", "pattern": "[a-z]{2}\\d"}, "minItems": 1, "maxItems": 4})", v);
  ASSERT_NE(g, nullptr);
  const int32_t n = g->PrecomputeAll();
  EXPECT_GT(n, 0);
  EXPECT_GT(g->cached_mask_bytes(), 0u);
  CheckMasksOnRandomWalks(g, 20, 20, 5);
}

// The real Qwen3 vocabulary (151k tokens with long runs, multi-byte pieces and <tool_call>-style
// added tokens): a few steps of a JSON schema walk against brute force.
TEST(Masks, RealVocabularyMatchesBruteForce) {
  auto tokenizer = Tokenizer::Load(std::string(SPARKSERVE_SOURCE_DIR) + "/../shared/fixtures/qwen3-tokenizer/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto v = TokenVocabulary::FromTokenizer(**tokenizer, static_cast<int32_t>((*tokenizer)->id_space_size()));
  auto g = Schema(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
      "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["city", "n"]})", v);
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(static_cast<size_t>(v->mask_words()));
  for (const char* piece : {"{\"", "city", "\":", " \"", "Par", "is", "\",", " \"n", "\": ", "4"}) {
    m.FillMask(mask);
    ASSERT_EQ(mask, BruteForceMask(m)) << "before '" << piece << "'";
    ASSERT_TRUE(m.AcceptBytes(piece)) << piece;
  }
  ASSERT_TRUE(m.AcceptBytes("2}"));
  EXPECT_TRUE(m.IsTerminated());
}

}  // namespace
}  // namespace sparkserve::text::constraint
