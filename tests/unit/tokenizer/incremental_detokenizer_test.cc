// IncrementalDetokenizer: pieces never split a character, concatenate to Decode, and come out as
// soon as a character is complete.
#include "text/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "text/tokenizer/utf8.h"
#include "tests/unit/tokenizer/test_tokenizers.h"

namespace sparkserve::text {
namespace {

using testing::Qwen3;

// The token whose bytes are the single byte `b`.
TokenId ByteToken(uint8_t b) {
  return *Qwen3().TokenToId(ByteLevelAlphabet::Get().FromBytes(std::string(1, static_cast<char>(b))));
}

std::vector<std::string> Stream(const std::vector<TokenId>& ids, bool skip_special) {
  IncrementalDetokenizer d(Qwen3(), skip_special);
  std::vector<std::string> pieces;
  for (TokenId id : ids) pieces.push_back(d.Push(id));
  pieces.push_back(d.Finish());
  return pieces;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& p : v) s += p;
  return s;
}

TEST(IncrementalDetokenizer, HoldsPartialCharacters) {
  // U+1F600 as four single-byte tokens: nothing until the last byte.
  const std::vector<TokenId> ids = {ByteToken('a'), ByteToken(0xF0), ByteToken(0x9F), ByteToken(0x98),
                                    ByteToken(0x80), ByteToken('b')};
  EXPECT_EQ(Stream(ids, false), (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80", "b", ""}));
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  const std::string fffd(kReplacementChar);
  // F0 9F then 'a': one U+FFFD for the maximal subpart, decided as soon as 'a' arrives.
  EXPECT_EQ(Stream({ByteToken(0xF0), ByteToken(0x9F), ByteToken('a')}, false),
            (std::vector<std::string>{"", "", fffd + "a", ""}));
  // A lone continuation byte is decided at once; a truncated tail only at the end.
  EXPECT_EQ(Stream({ByteToken(0x80), ByteToken(0xE4), ByteToken(0xB8)}, false),
            (std::vector<std::string>{fffd, "", "", fffd}));
}

TEST(IncrementalDetokenizer, SkippedSpecialTokensDoNotBreakCharacters) {
  const TokenId im_end = *Qwen3().TokenToId("<|im_end|>");
  const std::vector<TokenId> ids = {ByteToken(0xE4), im_end, ByteToken(0xB8), ByteToken(0xAD)};
  EXPECT_EQ(Join(Stream(ids, true)), "\xE4\xB8\xAD");
  EXPECT_EQ(Join(Stream(ids, true)), Qwen3().Decode(ids, true));
  EXPECT_EQ(Join(Stream(ids, false)), Qwen3().Decode(ids, false));
  EXPECT_NE(Join(Stream(ids, false)).find("<|im_end|>"), std::string::npos);
}

TEST(IncrementalDetokenizer, RandomSequencesMatchDecode) {
  const Tokenizer& t = Qwen3();
  std::mt19937 rng(11);
  std::vector<TokenId> high_bytes;
  for (int b = 0x80; b < 0x100; ++b) high_bytes.push_back(ByteToken(static_cast<uint8_t>(b)));
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<TokenId> ids;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const unsigned r = rng() % 10;
      if (r < 5) {
        ids.push_back(high_bytes[rng() % high_bytes.size()]);
      } else if (r < 9) {
        ids.push_back(static_cast<TokenId>(rng() % 151669));
      } else {
        ids.push_back(static_cast<TokenId>(151643 + rng() % 30));  // specials and unknown ids
      }
    }
    for (bool skip : {false, true}) {
      const auto pieces = Stream(ids, skip);
      std::string so_far;
      std::string bytes;
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_TRUE(IsValidUtf8(pieces[i]));
        so_far += pieces[i];
        if (const std::string* b = t.TokenBytes(ids[i]); b && !(skip && t.IsSpecial(ids[i]))) bytes += *b;
        // Emitted text = the decoded prefix minus only a still-completable tail (at most 3 bytes).
        std::string expected;
        const size_t used = AppendUtf8Lossy(bytes, expected, true);
        ASSERT_EQ(so_far, expected);
        ASSERT_LE(bytes.size() - used, 3u);
      }
      ASSERT_EQ(Join(pieces), t.Decode(ids, skip));
    }
  }
}

}  // namespace
}  // namespace sparkserve::text
