// SplitRegex: the Oniguruma-compatibility rewrite and HF's split piece listing (incl. empty matches).
#include "text/tokenizer/split_regex.h"

#include <gtest/gtest.h>

namespace sparkserve::text {
namespace {

constexpr std::string_view kWs =
    "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

TEST(RewriteForPcre2, WhitespaceEscapes) {
  const std::string ws(kWs);
  EXPECT_EQ(RewriteForPcre2("\\s+"), "[" + ws + "]+");
  EXPECT_EQ(RewriteForPcre2("[^\\s]"), "[^" + ws + "]");
  EXPECT_EQ(RewriteForPcre2("a\\\\s"), "a\\\\s");            // escaped backslash, then a literal s
  EXPECT_EQ(RewriteForPcre2("\\Q\\s\\E\\s"), "\\Q\\s\\E[" + ws + "]");
  EXPECT_EQ(RewriteForPcre2("[]\\s]"), "[]" + ws + "]");      // leading ] is literal, class goes on
  EXPECT_EQ(RewriteForPcre2("[[:alpha:]\\s]x"), "[[:alpha:]" + ws + "]x");
  const std::string nonws = RewriteForPcre2("[\\S]");
  EXPECT_EQ(nonws.find("\\S"), std::string::npos);
  EXPECT_EQ(RewriteForPcre2("\\S").substr(0, 12), "[\\x{0}-\\x{8}");
}

TEST(RewriteForPcre2, NewerUnicodeClasses) {
  const std::string l = RewriteForPcre2("\\p{L}+");
  EXPECT_EQ(l.substr(0, 6), "[\\p{L}");
  EXPECT_NE(l.find("\\x{31350}"), std::string::npos);  // CJK Extension H, Unicode 15
  EXPECT_EQ(RewriteForPcre2("[^\\pN]").find("[^\\pN\\x{"), 0u);
  EXPECT_EQ(RewriteForPcre2("\\p{Han}"), "\\p{Han}");   // only general categories are extended
  EXPECT_EQ(RewriteForPcre2("[\\P{L}]"), "[\\P{L}]");
}

std::vector<SplitRegex::Piece> Pieces(std::string_view pattern, std::string_view text) {
  auto re = SplitRegex::Compile(pattern, false);
  EXPECT_TRUE(re.ok()) << re.status();
  std::vector<SplitRegex::Piece> out;
  EXPECT_TRUE((*re)->FindMatches(text, out).ok());
  return out;
}

std::string Show(std::string_view text, const std::vector<SplitRegex::Piece>& pieces) {
  std::string s;
  for (const auto& p : pieces) {
    s += (p.is_match ? "[" : "(") + std::string(text.substr(p.begin, p.end - p.begin)) + (p.is_match ? "]" : ")");
  }
  return s;
}

TEST(SplitRegex, WhitespaceIsOnigurumaWhiteSpace) {
  // U+180E is not White_Space: PCRE2's own \s would take it.
  const std::string text = "a \xE1\xA0\x8E b\xE2\x80\xA8" "c";
  EXPECT_EQ(Show(text, Pieces("\\s+", text)), "(a)[ ](\xE1\xA0\x8E)[ ](b)[\xE2\x80\xA8](c)");
}

TEST(SplitRegex, GapsAndMatches) {
  EXPECT_EQ(Show("ab1c22", Pieces("\\p{N}", "ab1c22")), "(ab)[1](c)[2][2]");
  EXPECT_EQ(Show("xyz", Pieces("q", "xyz")), "(xyz)");
}

TEST(SplitRegex, EmptyMatchesFollowOnigFindIter) {
  // x* on "axxb": empty match at 0 kept, the repeat at 0 rejected, "xx", the empty match at 3
  // (right after "xx") rejected, the one at the end kept.
  const auto pieces = Pieces("x*", "axxb");
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(Show("axxb", pieces), "[](a)[xx](b)[]");
}

TEST(SplitRegex, LiteralPattern) {
  auto re = SplitRegex::Compile("a.b", true);
  ASSERT_TRUE(re.ok());
  std::vector<SplitRegex::Piece> out;
  ASSERT_TRUE((*re)->FindMatches("a.bxaxb", out).ok());
  EXPECT_EQ(Show("a.bxaxb", out), "[a.b](xaxb)");
}

TEST(SplitRegex, BadPatternIsAnError) {
  auto re = SplitRegex::Compile("(unclosed", false);
  ASSERT_FALSE(re.ok());
  EXPECT_NE(std::string(re.status().message()).find("(unclosed"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::text
