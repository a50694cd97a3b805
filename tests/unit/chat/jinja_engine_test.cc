// Engine behaviour the jinja2 comparison cannot see: error kinds, positions and payloads, Python
// float formatting, recursion limits.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "text/chat/jinja/template.h"
#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<std::string> Render(const std::string& source, const ordered_json& vars = ordered_json::object()) {
  auto t = Template::Parse(source, "t");
  if (!t.ok()) return t.status();
  return (*t)->Render(vars);
}

TEST(JinjaEngine, RendersWithHuggingFaceWhitespaceSettings) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before it.
  auto out = Render("{% for x in xs %}\n  {% if x %}\n[{{ x }}]\n  {% endif %}\n{% endfor %}\n", {{"xs", {1, 0, 2}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "[1]\n[2]\n");
}

TEST(JinjaEngine, SyntaxErrorCarriesLineAndColumn) {
  auto t = Template::Parse("hello\n  {% if %}x{% endif %}", "my_template");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), StartsWith("my_template:2:9: "));
}

TEST(JinjaEngine, UnclosedBlockNamesTheBlock) {
  auto t = Template::Parse("{% for x in y %}abc", "t");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("'endfor'"));
}

TEST(JinjaEngine, UnknownFilterFailsWhenEvaluated) {
  EXPECT_EQ(*Render("{% if false %}{{ x | no_such_filter }}{% endif %}ok"), "ok");
  auto out = Render("\n {{ x | no_such_filter }}");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), StartsWith("t:2:"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("No filter named 'no_such_filter'"));
}

TEST(JinjaEngine, RuntimeErrorCarriesPositionOfInnermostExpression) {
  auto out = Render("line one\n  {{ 1 + x.y.z }}", {{"x", ordered_json::object()}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), StartsWith("t:2:"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("'dict object' has no attribute 'y'"));
  EXPECT_FALSE(RaisedMessage(out.status()).has_value());
}

TEST(JinjaEngine, RaiseExceptionKeepsTheMessage) {
  auto out = Render("{# a #}\n\n{%- if true %}{{ raise_exception('Bad role: ' ~ r) }}{% endif %}", {{"r", "x"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(RaisedMessage(out.status()).has_value());
  EXPECT_EQ(*RaisedMessage(out.status()), "Bad role: x");
  EXPECT_THAT(std::string(out.status().message()), StartsWith("t:3:"));
}

TEST(JinjaEngine, UndefinedPrintsEmptyButFailsOnUse) {
  EXPECT_EQ(*Render("[{{ nothing }}]"), "[]");
  EXPECT_FALSE(Render("{{ nothing + 1 }}").ok());
  EXPECT_FALSE(Render("{{ nothing() }}").ok());
  EXPECT_FALSE(Render("{{ nothing.attr }}").ok());
}

TEST(JinjaEngine, RunawayRecursionIsAnError) {
  auto out = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("recursion"));
}

TEST(JinjaEngine, BreakOutsideLoopIsASyntaxError) {
  EXPECT_FALSE(Template::Parse("{% break %}", "t").ok());
  EXPECT_FALSE(Template::Parse("{% macro m() %}{% for x in y %}{% endfor %}{% continue %}{% endmacro %}", "t").ok());
}

TEST(JinjaEngine, FloatsPrintLikePythonRepr) {
  EXPECT_EQ(FormatFloat(1.0), "1.0");
  EXPECT_EQ(FormatFloat(0.1), "0.1");
  EXPECT_EQ(FormatFloat(1e16), "1e+16");
  EXPECT_EQ(FormatFloat(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(FormatFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatFloat(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(FormatFloat(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(FormatFloat(-0.0), "-0.0");
}

TEST(JinjaEngine, StringsReprLikePython) {
  EXPECT_EQ(ReprString("it's"), "\"it's\"");
  EXPECT_EQ(ReprString("a'\"b"), "'a\\'\"b'");
  EXPECT_EQ(ReprString("tab\there\n\x01"), "'tab\\there\\n\\x01'");
  EXPECT_EQ(ReprString("\xc3\xa9\xe2\x80\x8b"), "'\xc3\xa9\\u200b'");
}

TEST(JinjaEngine, TemplateRendersTwiceWithFreshState) {
  auto t = Template::Parse("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}", "t");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*(*t)->Render(ordered_json{{"xs", {1, 2, 3}}}), "6");
  EXPECT_EQ(*(*t)->Render(ordered_json{{"xs", {4}}}), "4");
}

}  // namespace
}  // namespace sparkserve::text::jinja
