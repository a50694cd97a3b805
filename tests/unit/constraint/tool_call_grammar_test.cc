// Tool-call grammars: forced calls in the XML and JSON forms (arguments per schema, required and
// optional parameters, several calls), auto mode (free text in which "<tool_call>" only opens a
// well-formed call), text without a marker, and the errors for strict schemas the XML form cannot
// carry. Masks of the auto grammar equal brute force along random walks.
#include <string>

#include "constraint_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "text/constraint/tool_call_grammar.h"

namespace sparkserve::text::constraint {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

const Json kWeather = Json::parse(R"({"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 6},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "unit": {"enum": ["c", "f"]},
    "opts": {"type": "object", "properties": {"wind": {"type": "boolean"}}, "required": ["wind"]}},
  "required": ["city", "days"]})");

std::vector<ToolSpec> Tools() {
  return {{"get_weather", kWeather, true}, {"ping", Json(nullptr), true}};
}

std::shared_ptr<const CompiledGrammar> Compile(absl::StatusOr<Grammar> g) {
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? MustCompile(*g, TestVocabulary(200)) : nullptr;
}

TEST(ToolCallGrammar, ForcedXmlCallsFollowTheSchema) {
  auto named = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenXml, Tools(), "get_weather", true));
  ASSERT_NE(named, nullptr);
  const std::string close = "</function>\n</tool_call>";
  EXPECT_TRUE(Matches(named, "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n" + close));
  EXPECT_TRUE(Matches(named, "<parameter=city>\nRome\n</parameter>\n<parameter=days>\n14\n</parameter>\n"
                             "<parameter=unit>\nc\n</parameter>\n<parameter=opts>\n{\"wind\": true}\n</parameter>\n" + close));
  EXPECT_FALSE(Matches(named, "<parameter=city>\nParis\n</parameter>\n" + close));               // days required
  EXPECT_FALSE(Matches(named, "<parameter=city>\nLondon!\n</parameter>\n<parameter=days>\n3\n</parameter>\n" + close));
  EXPECT_FALSE(Matches(named, "<parameter=city>\na<b\n</parameter>\n<parameter=days>\n3\n</parameter>\n" + close));
  EXPECT_FALSE(Matches(named, "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n15\n</parameter>\n" + close));
  // A named choice makes exactly one call.
  EXPECT_FALSE(Matches(named, "<parameter=city>\nP\n</parameter>\n<parameter=days>\n3\n</parameter>\n" + close +
                              "\n<tool_call>\n<function=ping>\n" + close));
  auto required = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenXml, Tools(), std::nullopt, true));
  ASSERT_NE(required, nullptr);
  EXPECT_TRUE(Matches(required, "<function=ping>\n" + close));
  EXPECT_TRUE(Matches(required, "<function=ping>\n" + close + "\n<tool_call>\n<function=get_weather>\n"
                                "<parameter=city>\nX\n</parameter>\n<parameter=days>\n1\n</parameter>\n" + close));
  EXPECT_FALSE(Matches(required, "<function=other>\n" + close));
  auto single = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenXml, Tools(), std::nullopt, false));
  EXPECT_FALSE(Matches(single, "<function=ping>\n" + close + "\n<tool_call>\n<function=ping>\n" + close));
}

TEST(ToolCallGrammar, ForcedJsonCallsFollowTheSchema) {
  auto named = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenJson, Tools(), "get_weather", false));
  ASSERT_NE(named, nullptr);
  EXPECT_TRUE(Matches(named, "{\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>"));
  EXPECT_FALSE(Matches(named, "{\"city\": \"Oslo\"}}\n</tool_call>"));
  auto required = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenJson, Tools(), std::nullopt, true));
  ASSERT_NE(required, nullptr);
  EXPECT_TRUE(Matches(required, "{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(Matches(required, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\", \"days\": 9}}\n</tool_call>"));
  EXPECT_FALSE(Matches(required, "{\"name\": \"ping\", \"arguments\": {\"x\": 1}}\n</tool_call>"));
}

TEST(ToolCallGrammar, StrictSchemasTheXmlFormCannotCarryAreRefused) {
  const Json either = Json::parse(R"({"type": "object", "properties": {"v": {"type": ["string", "integer"]}}})");
  auto g = ForcedToolCallGrammar(ToolCallFormat::kQwenXml, {{"f", either, true}}, std::nullopt, false);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("tool 'f' (strict): parameter 'v'"));
  const Json bad = Json::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}})");
  g = ForcedToolCallGrammar(ToolCallFormat::kQwenJson, {{"f", bad, true}}, std::nullopt, false);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'multipleOf'"));
  // Not strict: the call is still constrained, its arguments are free-form.
  auto loose = Compile(ForcedToolCallGrammar(ToolCallFormat::kQwenJson, {{"f", bad, false}}, std::nullopt, false));
  ASSERT_NE(loose, nullptr);
  EXPECT_TRUE(Matches(loose, "{\"name\": \"f\", \"arguments\": {\"n\": 3}}\n</tool_call>"));
}

TEST(ToolCallGrammar, TextWithoutAMarker) {
  Grammar g;
  g.set_root(g.AddRule("root"));
  g.SetBody(g.root(), Seq({TextWithout(g, "abab", ""), Literal("!")}));
  auto c = MustCompile(g, TestVocabulary(50));
  for (const char* yes : {"!", "aba!", "abaab!", "bbbaba!", "ab ab!", "aaabaa!"}) EXPECT_TRUE(Matches(c, yes)) << yes;
  for (const char* no : {"abab!", "aabab!", "ababab!", "xxabab!"}) EXPECT_FALSE(Matches(c, no)) << no;
}

TEST(ToolCallGrammar, AutoModeLeavesTextFreeButCallsWellFormed) {
  auto g = Compile(AutoToolCallGrammar(ToolCallFormat::kQwenXml, Tools()));
  ASSERT_NE(g, nullptr);
  const std::string call = "<tool_call>\n<function=ping>\n</function>\n</tool_call>";
  EXPECT_TRUE(Matches(g, "Sure, <tool and </tool_call> are just text."));
  EXPECT_TRUE(Matches(g, "Let me check." + call + " Done." + call));
  EXPECT_TRUE(Matches(g, ""));
  EXPECT_FALSE(Matches(g, "x<tool_call>\n<function=nope>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(g, "x<tool_call>junk"));
  CheckMasksOnRandomWalks(g, 20, 40, 6);
}

}  // namespace
}  // namespace sparkserve::text::constraint
