// GBNF and regex parsing, the automaton's checks, and matching text byte by byte.
#include <string>

#include "constraint_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/constraint/grammar_compiler.h"
#include "text/constraint/output_matcher.h"
#include "text/constraint/regex_parser.h"

namespace sparkserve::text::constraint {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const CompiledGrammar> Regex(const std::string& pattern, std::shared_ptr<const TokenVocabulary> v) {
  auto g = RegexGrammar(pattern);
  EXPECT_TRUE(g.ok()) << g.status();
  return MustCompile(*g, std::move(v));
}

TEST(Gbnf, ParsesRulesAlternativesRepetitionAndComments) {
  auto v = TestVocabulary(50);
  auto g = MustCompileGbnf(R"(# a list of small numbers
root ::= "[" ws ( num ( ws "," ws num )* )? ws "]"   # trailing comment
num  ::= "-"? [1-9] [0-9]{0,2} | "0"
ws   ::= [ \t\n]{0,2}
)", v);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "[]"));
  EXPECT_TRUE(Matches(g, "[1,-20, 300]"));
  EXPECT_TRUE(Matches(g, "[ 0 ]"));
  EXPECT_FALSE(Matches(g, "[01]"));
  EXPECT_FALSE(Matches(g, "[1000]"));
  EXPECT_FALSE(Matches(g, "[1,]"));
  EXPECT_FALSE(Matches(g, "[   1]"));  // at most 2 whitespace characters
  EXPECT_FALSE(Matches(g, "[1"));
}

TEST(Gbnf, RulesContinueAfterBarAndInsideParentheses) {
  auto g = MustCompileGbnf("root ::= \"a\" |\n  \"b\" | (\n \"c\"\n \"d\" )\n", TestVocabulary(10));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "a"));
  EXPECT_TRUE(Matches(g, "b"));
  EXPECT_TRUE(Matches(g, "cd"));
  EXPECT_FALSE(Matches(g, "c"));
}

TEST(Gbnf, EscapesAndUnicode) {
  auto g = MustCompileGbnf(R"(root ::= "\"q\"\n" [\x41-\x43] [^a-z\u00e9] "é" [\U0001F600])" "\n", TestVocabulary(10));
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "\"q\"\nB1é\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches(g, "\"q\"\nA中é\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(g, "\"q\"\nBxé\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(g, "\"q\"\nBéé\xF0\x9F\x98\x80"));
  // A partial UTF-8 character is not a match, though it is a valid prefix.
  GrammarMatcher m(g);
  EXPECT_TRUE(m.AcceptBytes("\"q\"\nB1\xC3"));
  EXPECT_FALSE(m.CanEnd());
}

TEST(Gbnf, ErrorsNameTheProblem) {
  struct Case {
    const char* text;
    const char* message;
    bool has_line = true;
  } cases[] = {
      {"root ::= foo\n", "rule 'foo' is used but never defined (line 1)"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
      {"root = \"a\"\n", "expected '::='"},
      {"root ::= \"abc\n", "unterminated string literal"},
      {"root ::= [a-\n", "unterminated character class"},
      {"root ::= (\"a\" \n", "expected ')'"},
      {"root ::= \"a\"{3,1}\n", "max below min"},
      {"start ::= \"a\"\n", "no 'root' rule", false},
      {"root ::= \"a\" b ::= \"c\"\n", "starts on the line of the previous rule"},
      {"root ::= \"\\q\"\n", "unknown escape"},
  };
  for (const Case& c : cases) {
    auto g = ParseGbnf(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message)) << c.text;
    if (c.has_line) {
      EXPECT_THAT(std::string(g.status().message()), HasSubstr("line ")) << c.text;
    }
  }
}

TEST(Automaton, RefusesLeftRecursionNamingTheRule) {
  auto g = ParseGbnf("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n");
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::Compile(*g, TestVocabulary(10));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'expr' is left-recursive"));
  // Hidden behind a nullable prefix, too.
  g = ParseGbnf("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"\n");
  ASSERT_TRUE(g.ok());
  c = CompiledGrammar::Compile(*g, TestVocabulary(10));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("left-recursive"));
}

TEST(Automaton, RightRecursionAndNullableRulesWork) {
  auto v = TestVocabulary(100);
  auto g = MustCompileGbnf("root ::= list\nlist ::= item (\",\" list)?\nitem ::= opt \"a\" opt\nopt ::= \"b\"?\n", v);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "a"));
  EXPECT_TRUE(Matches(g, "bab,a,ba,ab"));
  EXPECT_FALSE(Matches(g, "a,"));
  EXPECT_FALSE(Matches(g, "bb"));
  // Right recursion keeps the stack flat: a long list needs no more frames than a short one.
  GrammarMatcher m(g);
  std::string text = "a";
  for (int i = 0; i < 2000; ++i) text += ",a";
  EXPECT_TRUE(m.AcceptBytes(text));
  EXPECT_TRUE(m.CanEnd());
}

TEST(Automaton, RefusesGrammarsThatMatchNothing) {
  auto g = ParseGbnf("root ::= \"a\" never\nnever ::= \"b\" never\n");
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::Compile(*g, TestVocabulary(10));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("matches no text"));
}

// Request fields (guided_regex, guided_grammar...) are untrusted: deep nesting is an error, not a
// stack overflow in the recursive-descent parsers (100,000 '(' crashed both before the bound).
TEST(Parsers, RefuseNestingPastTheBound) {
  const std::string deep(100000, '(');
  const std::string close(100000, ')');
  auto r = RegexGrammar(deep + "a" + close);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("nested deeper than 64"));
  auto g = ParseGbnf("root ::= " + deep + "\"a\"" + close + "\n");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("nested deeper than 64"));
  // Stacked quantifiers nest as deeply, one Repeat per quantifier: refused as Python's re does.
  std::string stacked = "a";
  for (int i = 0; i < 100000; ++i) stacked += "{1}";
  r = RegexGrammar(stacked);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("multiple repeat"));
  EXPECT_FALSE(RegexGrammar("a**").ok());
  // 64 levels still parse; a lazy quantifier is one quantifier.
  EXPECT_TRUE(RegexGrammar(std::string(64, '(') + "a" + std::string(64, ')')).ok());
  EXPECT_TRUE(ParseGbnf("root ::= " + std::string(64, '(') + "\"a\"" + std::string(64, ')') + "\n").ok());
  EXPECT_TRUE(RegexGrammar("a{2,3}?b*?").ok());
}

TEST(Automaton, RefusesGrammarsPastTheLimits) {
  auto g = ParseGbnf("root ::= ([a-z] [0-9] [A-Z]){10000}\n");
  ASSERT_TRUE(g.ok());
  AutomatonLimits limits;
  limits.max_dfa_states = 5000;
  auto c = CompiledGrammar::Compile(*g, TestVocabulary(10), limits);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("too large"));
}

TEST(Regex, FullMatchSemanticsAndSyntax) {
  auto v = TestVocabulary(50);
  struct Case {
    const char* pattern;
    std::vector<std::string> yes, no;
  } cases[] = {
      {"^[a-c]+\\d{2}$", {"a12", "abc99"}, {"a1", "d12", "a123", "12"}},
      {"(cat|dog)s?", {"cat", "dogs"}, {"cats!", "ca", "Cat"}},
      {"\\w+@\\w+\\.com", {"a_1@b.com"}, {"a@b.org", "@b.com"}},
      {"[^\\d\\s]{1,3}", {"ab", "é中"}, {"a1", " ", "abcd"}},
      {"x{2,}y{,2}", {"xx", "xxxxyy"}, {"x", "xxyyy"}},
      {"a.c", {"abc", "a中c"}, {"a\nc"}},
      {"(?:ab)+(?P<n>\\.)\\x41\\u00e9", {"abab.Aé"}, {"aba.Aé"}},
      {"\\(\\)\\[\\]\\{\\}", {"()[]{}"}, {"()"}},
      {"a{,}", {"a", "aaa", ""}, {"a{,}"}},  // Python: {,} is {0,}
      {"a{}b{x}", {"a{}b{x}"}, {"ab"}},      // not quantifiers: literal braces
      {"[-a]|[a-]|[]a]", {"-", "a", "]"}, {"b"}},
  };
  for (const Case& c : cases) {
    auto g = Regex(c.pattern, v);
    ASSERT_NE(g, nullptr) << c.pattern;
    for (const std::string& s : c.yes) EXPECT_TRUE(Matches(g, s)) << c.pattern << " should match " << s;
    for (const std::string& s : c.no) EXPECT_FALSE(Matches(g, s)) << c.pattern << " should not match " << s;
  }
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  struct Case {
    const char* pattern;
    const char* message;
  } cases[] = {
      {"(a)\\1", "backreferences"}, {"a(?=b)", "lookarounds"}, {"\\bword", "word boundaries"},
      {"a^b", "anchors"},           {"a++", "possessive"},     {"(ab", "missing ')'"},
      {"ab)", "unbalanced"},        {"*a", "nothing to repeat"}, {"[a", "missing ']'"},
      {"(?i)abc", "inline flags"},  {"[z-a]", "bad character range"}, {"a{5,2}", "max below min"},
  };
  for (const Case& c : cases) {
    auto g = RegexGrammar(c.pattern);
    ASSERT_FALSE(g.ok()) << c.pattern;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message)) << c.pattern;
  }
}

TEST(Matcher, TerminatesWhenNothingMayFollowAndRollsBack) {
  auto v = TestVocabulary(200);
  auto g = Regex("ab(c|de)?", v);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.AcceptBytes("a"));
  EXPECT_TRUE(m.AcceptBytes("b"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.IsTerminated());
  std::vector<uint32_t> after_ab(static_cast<size_t>(v->mask_words()));
  m.FillMask(after_ab);
  EXPECT_TRUE(m.AcceptBytes("d"));
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.AcceptBytes("e"));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(m.num_steps(), 4);
  m.Rollback(2);
  EXPECT_EQ(m.num_steps(), 2);
  EXPECT_TRUE(m.CanEnd());
  std::vector<uint32_t> again(static_cast<size_t>(v->mask_words()));
  m.FillMask(again);
  EXPECT_EQ(again, after_ab);
  EXPECT_TRUE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.IsTerminated());
}

TEST(Matcher, TokensWithoutTextAreNeverAccepted) {
  auto v = TestVocabulary(10);
  auto g = Regex(".*", v);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.AcceptToken(v->vocab_size() - 1));  // a special token: no text
  EXPECT_FALSE(m.AcceptToken(-1));
  EXPECT_FALSE(m.AcceptToken(v->vocab_size()));
}

TEST(OutputMatcher, FreeUntilTheReasoningMarkerThenConstrained) {
  std::vector<std::string> tokens{"<", "/", "think", ">", "</think>", "\n\n", "nk>\n\n{", "{", "}", "x", "</thi", "nk>"};
  auto v = TokenVocabulary::Create(tokens, static_cast<int32_t>(tokens.size()));
  auto g = MustCompile(WithLeadingWhitespace(*RegexGrammar("\\{\\}"), 4), v);
  // Marker split across tokens, with the grammar's first bytes in the marker's last token.
  OutputMatcher m(g, "</think>");
  EXPECT_FALSE(m.active());
  EXPECT_TRUE(m.AcceptToken(9));   // x: free text
  EXPECT_TRUE(m.AcceptToken(10));  // </thi
  EXPECT_FALSE(m.active());
  EXPECT_TRUE(m.AcceptToken(6));   // nk>\n\n{ : ends reasoning, "\n\n{" goes to the grammar
  EXPECT_TRUE(m.active());
  EXPECT_FALSE(m.AcceptToken(7));  // a second { is not allowed
  EXPECT_TRUE(m.AcceptToken(8));
  EXPECT_TRUE(m.IsTerminated());
  m.Rollback(2);  // back inside reasoning, marker half matched
  EXPECT_FALSE(m.active());
  EXPECT_TRUE(m.AcceptToken(11));  // nk>
  EXPECT_TRUE(m.active());
  EXPECT_TRUE(m.AcceptToken(5));   // \n\n
  EXPECT_TRUE(m.AcceptToken(7));
  EXPECT_FALSE(m.CanEnd());
  // Without a marker the grammar applies from the first token.
  OutputMatcher direct(g, "");
  EXPECT_TRUE(direct.active());
  EXPECT_FALSE(direct.AcceptToken(9));
}

TEST(Compiler, CachesByContentAndEvictsTheLeastRecentlyUsed) {
  auto v = TestVocabulary(20);
  GrammarCompiler compiler(v, 2);
  auto a1 = compiler.Compile(*ParseGbnf("root ::= \"a\"\n"));
  auto a2 = compiler.Compile(*ParseGbnf("root   ::=   \"a\"   # same grammar, other text\n"));
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->get(), a2->get());
  EXPECT_EQ(compiler.hits(), 1);
  EXPECT_EQ(compiler.misses(), 1);
  auto b = compiler.Compile(*ParseGbnf("root ::= \"b\"\n"));
  auto c = compiler.Compile(*ParseGbnf("root ::= \"c\"\n"));  // evicts "a"
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_EQ(compiler.size(), 2u);
  auto a3 = compiler.Compile(*ParseGbnf("root ::= \"a\"\n"));
  ASSERT_TRUE(a3.ok());
  EXPECT_NE(a3->get(), a1->get());
  EXPECT_EQ(compiler.misses(), 4);
  // Errors are not cached as grammars.
  auto bad = compiler.Compile(*ParseGbnf("root ::= x\nx ::= x \"a\"\n"));
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace sparkserve::text::constraint
