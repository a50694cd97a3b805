// UTF-8 validation and the lossy conversion's maximal-subpart replacement (Unicode §3.9, Table 3-8).
#include "text/tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <random>

namespace sparkserve::text {
namespace {

const std::string kFFFD(kReplacementChar);

TEST(Utf8, ValidPrefixLength) {
  EXPECT_EQ(ValidUtf8PrefixLength(""), 0u);
  EXPECT_EQ(ValidUtf8PrefixLength("plain ascii text, long enough for the 8-byte path"), 49u);
  EXPECT_EQ(ValidUtf8PrefixLength("h\xC3\xA9llo \xF0\x9F\x98\x80"), 11u);
  EXPECT_EQ(ValidUtf8PrefixLength("abc\xC3"), 3u);               // truncated
  EXPECT_EQ(ValidUtf8PrefixLength("abcdefgh\xC0\xAF"), 8u);      // overlong
  EXPECT_EQ(ValidUtf8PrefixLength("x\xED\xA0\x80"), 1u);         // surrogate
  EXPECT_EQ(ValidUtf8PrefixLength("x\xF4\x90\x80\x80"), 1u);     // above U+10FFFF
  EXPECT_EQ(ValidUtf8PrefixLength("x\xF4\x8F\xBF\xBF"), 5u);     // U+10FFFF
  EXPECT_EQ(ValidUtf8PrefixLength(std::string("a\0b", 3)), 3u);  // NUL is valid
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  // The Unicode Standard's Table 3-8 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  EXPECT_EQ(Utf8Lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFFFD + kFFFD + kFFFD + "b" + kFFFD + "c" + kFFFD + kFFFD + "d");
  // Rust's documented example for String::from_utf8_lossy.
  EXPECT_EQ(Utf8Lossy("Hello \xF0\x90\x80World"), "Hello " + kFFFD + "World");
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), kFFFD + kFFFD);                   // C0 is never a lead byte
  EXPECT_EQ(Utf8Lossy("\xE0\x80\xAF"), kFFFD + kFFFD + kFFFD);       // E0 80: 80 not allowed second
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), kFFFD + kFFFD + kFFFD);       // surrogate
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), kFFFD + kFFFD + kFFFD + kFFFD);
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), kFFFD);                       // truncated at the end: one
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98" "a"), kFFFD + "a");
  EXPECT_EQ(Utf8Lossy("\xFF\xFE"), kFFFD + kFFFD);
  EXPECT_EQ(Utf8Lossy("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

TEST(Utf8, StopAtTruncatedTail) {
  std::string out;
  EXPECT_EQ(AppendUtf8Lossy("ab\xF0\x9F\x98", out, true), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  // An invalid tail is decided at once; only a still-completable one is held.
  EXPECT_EQ(AppendUtf8Lossy("ab\xF0\x41", out, true), 4u);
  EXPECT_EQ(out, "ab" + kFFFD + "A");
  out.clear();
  EXPECT_EQ(AppendUtf8Lossy("\xE0\x80", out, true), 2u);  // E0 80 can never complete
  EXPECT_EQ(out, kFFFD + kFFFD);
}

// Feeding random bytes in random chunks, holding back truncated tails, gives the whole conversion.
TEST(Utf8, ChunkedLossyEqualsWhole) {
  std::mt19937 rng(1);
  const std::vector<uint8_t> interesting = {0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xE1,
                                            0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xC0, 0xFF, 0x90};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(interesting[rng() % interesting.size()]));
    std::string streamed, pending;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t len = 1 + rng() % 4;
      pending += bytes.substr(pos, len);
      pos += len;
      const size_t used = AppendUtf8Lossy(pending, streamed, true);
      pending.erase(0, used);
      ASSERT_LE(pending.size(), 3u);
    }
    AppendUtf8Lossy(pending, streamed);
    ASSERT_EQ(streamed, Utf8Lossy(bytes));
    ASSERT_TRUE(IsValidUtf8(streamed));
  }
}

TEST(Utf8, EncodeDecodeCodePoints) {
  for (char32_t c : {U'\0', U'A', U'\u00E9', U'\u20AC', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    AppendUtf8(c, s);
    ASSERT_TRUE(IsValidUtf8(s));
    size_t i = 0;
    EXPECT_EQ(DecodeUtf8At(s, i), c);
    EXPECT_EQ(i, s.size());
  }
}

}  // namespace
}  // namespace sparkserve::text
