// Tokenizer: merge order, added tokens, decode and thread safety, on a synthetic tokenizer and the
// Qwen3 fixture (expected ids come from Hugging Face tokenizers 0.23.3).
#include "text/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tests/unit/tokenizer/test_tokenizers.h"

namespace sparkserve::text {
namespace {

using testing::Qwen3;
using testing::SmallTokenizerJson;

std::vector<TokenId> MustEncode(const Tokenizer& t, std::string_view text, bool add_special = true) {
  auto ids = t.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

TEST(Tokenizer, MergesApplyLowestRankFirst) {
  // "abc": with "b c" ranked first the word becomes a|bc and then abc; with "a b" first, ab|c then abc.
  auto t1 = Tokenizer::FromJson(SmallTokenizerJson({{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  ASSERT_TRUE(t1.ok()) << t1.status();
  EXPECT_EQ(MustEncode(**t1, "abc"), (std::vector<TokenId>{258}));   // "abc" got id 258
  EXPECT_EQ(MustEncode(**t1, "ab"), (std::vector<TokenId>{257}));
  EXPECT_EQ(MustEncode(**t1, "cab"), (std::vector<TokenId>{'c', 257}));
  auto t2 = Tokenizer::FromJson(SmallTokenizerJson({{"a", "b"}, {"b", "c"}, {"a", "bc"}}));
  ASSERT_TRUE(t2.ok());
  // a b merges first, so "a bc" never applies: ab|c.
  EXPECT_EQ(MustEncode(**t2, "abc"), (std::vector<TokenId>{256, 'c'}));
  // Ties go to the leftmost pair: "aaa" with "a a" -> aa|a.
  auto t3 = Tokenizer::FromJson(SmallTokenizerJson({{"a", "a"}}));
  ASSERT_TRUE(t3.ok());
  EXPECT_EQ(MustEncode(**t3, "aaa"), (std::vector<TokenId>{256, 'a'}));
  EXPECT_EQ(MustEncode(**t3, "aaaa"), (std::vector<TokenId>{256, 256}));
}

TEST(Tokenizer, MergePairsAsLists) {
  nlohmann::json j = SmallTokenizerJson({{"h", "i"}});
  j["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"h", "i"})});
  auto t = Tokenizer::FromJson(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(MustEncode(**t, "hi"), (std::vector<TokenId>{256}));
}

TEST(Tokenizer, IgnoreMergesTakesWholeWordsFromTheVocab) {
  nlohmann::json j = SmallTokenizerJson({{"a", "b"}, {"c", "d"}});
  j["model"]["vocab"]["abcd"] = 300;  // reachable only as a whole word: no merge builds it
  j["model"]["ignore_merges"] = true;
  auto t = Tokenizer::FromJson(j);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(MustEncode(**t, "abcd"), (std::vector<TokenId>{300}));
  EXPECT_EQ(MustEncode(**t, "abcdab"), (std::vector<TokenId>{256, 257, 256}));
}

TEST(Tokenizer, HeapAndLinearMergeLoopsAgree) {
  const BpeModel& m = Qwen3().model();
  std::mt19937 rng(5);
  const std::string alphabet = "aeinrst lo\xC3\xA9\xE4\xB8\xAD";
  for (int i = 0; i < 2000; ++i) {
    std::string word;
    const size_t len = 2 + rng() % 300;
    for (size_t k = 0; k < len; ++k) word.push_back(alphabet[rng() % alphabet.size()]);
    std::vector<TokenId> linear, heap;
    m.EncodeWordUncached(word, false, linear);
    m.EncodeWordUncached(word, true, heap);
    ASSERT_EQ(linear, heap) << word;
  }
}

TEST(Tokenizer, Qwen3MatchesHuggingFace) {
  const Tokenizer& t = Qwen3();
  // Expected ids: tokenizers 0.23.3, Tokenizer.from_file(fixture).encode(text).ids
  EXPECT_EQ(MustEncode(t, "h\xC3\xA9llo \xF0\x9F\x98\x80 <|im_start|>x<think>"),
            (std::vector<TokenId>{71, 18503, 385, 90316, 220, 151644, 87, 151667}));
  EXPECT_EQ(MustEncode(t, "hello world"), (std::vector<TokenId>{14990, 1879}));
  EXPECT_EQ(MustEncode(t, ""), (std::vector<TokenId>{}));
  // No BOS for Qwen: the post-processor is ByteLevel.
  EXPECT_EQ(MustEncode(t, "hello", true), MustEncode(t, "hello", false));
}

TEST(Tokenizer, DecodeAndLookups) {
  const Tokenizer& t = Qwen3();
  const std::vector<TokenId> ids = {71, 18503, 385, 90316, 220, 151644, 87, 151667};
  EXPECT_EQ(t.Decode(ids, false), "h\xC3\xA9llo \xF0\x9F\x98\x80 <|im_start|>x<think>");
  // <|im_start|> is special, <think> is not (tokenizer.json "special" flags).
  EXPECT_EQ(t.Decode(ids, true), "h\xC3\xA9llo \xF0\x9F\x98\x80 x<think>");
  EXPECT_EQ(t.Decode(std::vector<TokenId>{999999, -1, 33}, false), "B");  // unknown ids are skipped
  EXPECT_EQ(t.TokenToId("<|im_end|>"), 151645);
  EXPECT_EQ(t.TokenToId("\xC4\xA0world"), 1879);  // "Ġworld"
  EXPECT_EQ(t.IdToToken(151667), "<think>");
  EXPECT_FALSE(t.IdToToken(151669).has_value());
  EXPECT_TRUE(t.IsSpecial(151643));
  EXPECT_FALSE(t.IsSpecial(151667));
  EXPECT_EQ(t.id_space_size(), 151669u);
}

TEST(Tokenizer, InvalidUtf8IsRejectedWithItsOffset) {
  auto ids = Qwen3().Encode("ok \xC3(", true);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(ids.status().message()).find("offset 3"), std::string::npos) << ids.status();
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const Tokenizer& t = Qwen3();
  std::vector<std::string> texts;
  std::mt19937 rng(9);
  const std::vector<std::string> words = {"the", " cat", " \xE4\xB8\xAD\xE6\x96\x87", " na\xC3\xAFve", "\n\n", " 42",
                                          "<|im_end|>", " \xF0\x9F\x91\x8D", "ing", " \xD0\xBF\xD1\x80\xD0\xB8"};
  for (int i = 0; i < 200; ++i) {
    std::string s;
    for (int k = 0; k < 50; ++k) s += words[rng() % words.size()] + std::to_string(rng() % 1000);
    texts.push_back(s);
  }
  std::vector<std::vector<TokenId>> expected;
  for (const auto& s : texts) expected.push_back(MustEncode(t, s));
  t.model().ClearCache();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (size_t th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t i = th; i < texts.size() + th; ++i) {
          const size_t k = i % texts.size();
          auto ids = t.Encode(texts[k]);
          if (!ids.ok() || *ids != expected[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace sparkserve::text
