// Loading refuses what it does not implement, naming the component; bad files give clear errors.
#include <gtest/gtest.h>

#include <functional>

#include "text/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/test_tokenizers.h"

namespace sparkserve::text {
namespace {

using Json = nlohmann::json;

struct BadCase {
  const char* what;
  std::function<void(Json&)> mutate;
  const char* expected_in_message;
};

TEST(TokenizerLoad, RefusesUnsupportedComponentsByName) {
  const std::vector<BadCase> cases = {
      {"WordPiece model", [](Json& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece"},
      {"Unigram model", [](Json& j) { j["model"] = {{"type", "Unigram"}, {"vocab", Json::array()}}; }, "Unigram"},
      {"WordLevel model", [](Json& j) { j["model"]["type"] = "WordLevel"; }, "WordLevel"},
      {"Metaspace pre-tokenizer", [](Json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }, "Metaspace"},
      {"Whitespace in a Sequence",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "ByteLevel"}}}}};
       },
       "Whitespace"},
      {"no ByteLevel", [](Json& j) { j["pre_tokenizer"] = nullptr; }, "ByteLevel"},
      {"ByteLevel not last",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers",
                                {{{"type", "ByteLevel"}},
                                 {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Isolated"}}}}};
       },
       "last"},
      {"Lowercase normalizer", [](Json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "Lowercase"},
      {"Replace inside a normalizer Sequence",
       [](Json& j) {
         j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Replace"}}}}};
       },
       "Replace"},
      {"Metaspace decoder", [](Json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, "Metaspace"},
      {"no decoder", [](Json& j) { j["decoder"] = nullptr; }, "decoder"},
      {"unknown post-processor", [](Json& j) { j["post_processor"] = {{"type", "Frobnicate"}}; }, "Frobnicate"},
      {"byte_fallback", [](Json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback"},
      {"dropout", [](Json& j) { j["model"]["dropout"] = 0.1; }, "dropout"},
      {"continuing_subword_prefix", [](Json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, "##"},
      {"merge of unknown tokens", [](Json& j) { j["model"]["merges"].push_back("zz qq"); }, "missing from the vocab"},
      {"malformed merge", [](Json& j) { j["model"]["merges"].push_back("a b c"); }, "expected"},
      {"Split without pattern",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "Split"}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
       },
       "pattern"},
      {"unknown split behavior",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers",
                                {{{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}, {{"type", "ByteLevel"}}}}};
       },
       "Sideways"},
      {"bad regex",
       [](Json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers",
                                {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}};
       },
       "(a"},
  };
  for (const BadCase& c : cases) {
    Json j = testing::SmallTokenizerJson({{"a", "b"}});
    c.mutate(j);
    auto t = Tokenizer::FromJson(j);
    ASSERT_FALSE(t.ok()) << c.what;
    EXPECT_NE(std::string(t.status().message()).find(c.expected_in_message), std::string::npos)
        << c.what << ": " << t.status();
  }
}

TEST(TokenizerLoad, BadFiles) {
  auto missing = Tokenizer::Load("/nonexistent/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find("/nonexistent/dir"), std::string::npos);
  EXPECT_FALSE(Tokenizer::FromJsonText("{not json").ok());
  EXPECT_FALSE(Tokenizer::FromJsonText("[1, 2]").ok());
  EXPECT_FALSE(Tokenizer::FromJsonText("{}").ok());
}

TEST(TokenizerLoad, TemplatePostProcessorAddsSpecialTokens) {
  Json j = testing::SmallTokenizerJson({{"a", "b"}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
                          {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
  auto t = Tokenizer::FromJson(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Encode("ab", true), (std::vector<TokenId>{1, 256, 2}));
  EXPECT_EQ(*(*t)->Encode("ab", false), (std::vector<TokenId>{256}));
}

}  // namespace
}  // namespace sparkserve::text
