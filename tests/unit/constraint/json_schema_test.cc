// JSON schema conversion: what each keyword lets through and what it refuses, numeric bounds
// checked against every number in a window, and the errors for unsupported or unsatisfiable
// schemas.
#include <cmath>
#include <string>

#include "constraint_test_util.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "text/constraint/json_schema_grammar.h"
#include "text/constraint/number_range.h"

namespace sparkserve::text::constraint {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

std::shared_ptr<const CompiledGrammar> Schema(const std::string& schema) {
  static auto v = TestVocabulary(50);
  auto g = JsonSchemaGrammar(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status() << " for " << schema;
  return g.ok() ? MustCompile(*g, v) : nullptr;
}

std::string SchemaError(const std::string& schema) {
  auto g = JsonSchemaGrammar(Json::parse(schema));
  if (g.ok()) {
    auto c = CompiledGrammar::Compile(*g, TestVocabulary(10));
    return c.ok() ? "" : std::string(c.status().message());
  }
  return std::string(g.status().message());
}

struct Case {
  std::string schema;
  std::vector<std::string> yes, no;
};

TEST(JsonSchema, KeywordsAcceptAndRefuse) {
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]})",
       {R"({"a": 1})", R"({"a":-7,"b":"x"})", "{\n  \"a\": 0,\n  \"b\": \"\\n\\u00e9\"\n}"},
       {R"({"b": "x", "a": 1})", R"({})", R"({"a": 1, "c": 2})", R"({"a": 1.5})", R"({"a": 01})", R"( {"a": 1})",
        R"({"a": 1} )", R"({"a":   1})", R"({"a": 1, "b": "\ud800"})"}},
      {R"({"type": "object", "properties": {"x": {"type": "boolean"}, "y": {"type": "null"}}})",
       {"{}", R"({"y": null})", R"({"x": true, "y": null})"}, {R"({"y": null, "x": true})", R"({,"y": null})"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("é中\"")", R"("a\u0041b")"}, {R"("a")", R"("abcd")", R"("\u00")"}},
      {R"({"type": "string", "pattern": "^[A-Z]{2}-\\d+$"})", {R"("AB-12")"}, {R"("AB-")", R"("ab-1")"}},
      {R"({"type": "string", "pattern": "a\"b\\\\c"})", {R"("a\"b\\c")"}, {R"("a"b\c")"}},
      {R"({"type": "string", "format": "date"})", {R"("2024-02-28")", R"("1999-12-31")"}, {R"("2024-02-30")", R"("2024-13-01")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"enum": ["red", 3, null, {"k": [1]}]})", {R"("red")", "3", "null", R"({"k":[1]})"}, {R"("blue")", "4"}},
      {R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"}},
      {R"({"type": ["integer", "null"]})", {"5", "null"}, {"\"5\"", "5.5"}},
      {R"({"type": "string", "nullable": true})", {"\"s\"", "null"}, {"1"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}, "maxItems": 2}]})",
       {"1", "[]", "[1, 2]"}, {"[1,2,3]", "\"x\""}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
       {"[1, 2]", "[1,2,3]"}, {"[1]", "[1,2,3,4]", "[]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
       {R"(["a", 1])", R"(["a"])", "[]"}, {R"([1, "a"])", R"(["a", 1, 2])"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}, "minItems": 2})",
       {R"(["a", true])", R"(["a", true, false])"}, {R"(["a"])", R"(["a", 1])"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
          "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"},
       {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})",
       {R"({"a": 1, "b": true})", R"({"b": false, "ab": true})", R"({"": true})"},
       {R"({"a": 1, "a": true})", R"({"b": 1})", R"({"a": 1, "a": 2})"}},
      {R"({"type": "object", "additionalProperties": true})", {R"({"any": [1, {"x": null}]})", "{}"}, {"[]"}},
      {R"({})", {"1", "\"s\"", R"({"a": [true, null]})"}, {"tru", "{\"a\"}"}},
      {R"({"allOf": [{"type": "integer", "maximum": 3}], "title": "t", "description": "d", "x-custom": 1})",
       {"3", "-1"}, {"4"}},
  };
  for (const Case& c : cases) {
    auto g = Schema(c.schema);
    ASSERT_NE(g, nullptr) << c.schema;
    for (const std::string& s : c.yes) EXPECT_TRUE(Matches(g, s)) << c.schema << "\n  should accept " << s;
    for (const std::string& s : c.no) EXPECT_FALSE(Matches(g, s)) << c.schema << "\n  should refuse " << s;
  }
}

TEST(JsonSchema, WhitespaceIsBounded) {
  auto g = Schema(R"({"type": "array", "items": {"type": "integer"}})");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "[\n" + std::string(kMaxIndent, ' ') + "1,\n\t2\n]"));
  EXPECT_FALSE(Matches(g, "[\n" + std::string(kMaxIndent + 1, ' ') + "1]"));
  EXPECT_FALSE(Matches(g, "[  1]"));
  EXPECT_FALSE(Matches(g, "[\n\n1]"));
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "integer", "multipleOf": 3})", "'multipleOf'"},
      {R"({"not": {"type": "string"}})", "'not'"},
      {R"({"type": "object", "patternProperties": {"^a": {}}})", "'patternProperties'"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
      {R"({"type": "object", "properties": {"x": {"if": {}}}})", "'if' (at #/properties/x)"},
      {R"({"allOf": [{"type": "integer"}, {"minimum": 1}]})", "'allOf'"},
      {R"({"type": "object", "minProperties": 1})", "'minProperties'"},
      {R"({"$ref": "https://example.com/schema"})", "only references inside the schema"},
      {R"({"$ref": "#/$defs/missing"})", "points to nothing"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
      {R"({"type": "strings"})", "unknown type 'strings'"},
  };
  for (const auto& [schema, message] : cases) EXPECT_THAT(SchemaError(schema), HasSubstr(message)) << schema;
}

TEST(JsonSchema, UnsatisfiableSchemasAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "string", "minLength": 5, "maxLength": 2})", "minLength (5) exceeds maxLength (2)"},
      {R"({"type": "array", "minItems": 3, "maxItems": 1})", "minItems (3) exceeds maxItems (1)"},
      {R"({"enum": []})", "'enum' at # is empty"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "integer bounds at # cannot be satisfied"},
      {R"({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2})", "cannot be satisfied"},
      {R"({"type": "number", "minimum": 2.5, "exclusiveMaximum": 2.5})", "number bounds at # cannot be satisfied"},
      {R"({"type": "object", "properties": {}, "required": ["a"], "additionalProperties": false})", "property 'a' is required"},
      {R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})", "asks for more items"},
      {"false", "is false"},
  };
  for (const auto& [schema, message] : cases) EXPECT_THAT(SchemaError(schema), HasSubstr(message)) << schema;
}

// Every integer in a window, against the bounds, for many bound pairs.
TEST(NumberRange, IntegersMatchExactlyTheRange) {
  auto v = TestVocabulary(10);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 0}, {-5, 5}, {7, 123}, {-130, -9}, {99, 1000}, {-1001, 10}, {1, 9}};
  for (auto [lo, hi] : ranges) {
    Grammar g;
    const int32_t root = g.AddRule("root");
    auto e = IntegerRange(lo, hi);
    ASSERT_TRUE(e.ok());
    g.SetBody(root, *e);
    g.set_root(root);
    auto c = MustCompile(g, v);
    for (int64_t x = -1200; x <= 1200; ++x) {
      EXPECT_EQ(Matches(c, std::to_string(x)), x >= lo && x <= hi) << x << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(Matches(c, "-0"));
    EXPECT_FALSE(Matches(c, "007"));
  }
  // One-sided: everything up to the digit limit.
  auto e = IntegerRange(std::nullopt, int64_t{-3});
  ASSERT_TRUE(e.ok());
  Grammar g;
  g.set_root(g.AddRule("root"));
  g.SetBody(g.root(), *e);
  auto c = MustCompile(g, v);
  EXPECT_TRUE(Matches(c, "-9999999999999999"));
  EXPECT_FALSE(Matches(c, "-10000000000000000"));
  EXPECT_FALSE(Matches(c, "-2"));
}

// Decimal strings on a grid (and with extra digits), against inclusive and exclusive bounds.
TEST(NumberRange, DecimalsMatchExactlyTheBounds) {
  auto v = TestVocabulary(10);
  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_excl, hi_excl;
  };
  const std::vector<Bounds> cases = {{0.0, 1.5, false, false}, {0.0, 1.5, true, true},   {-2.25, 0.5, false, true},
                                     {-1.0, -0.1, true, false}, {0.05, std::nullopt, false, false},
                                     {std::nullopt, -0.75, false, true}, {10.0, 10.0, false, false}};
  std::vector<std::string> texts;
  for (int i = -300; i <= 300; ++i) {
    const double x = i / 100.0;
    texts.push_back(fmt::format("{:.2f}", x));
    texts.push_back(fmt::format("{:.3f}", x + 0.001));
    if (i % 25 == 0) texts.push_back(fmt::format("{}", static_cast<int>(std::lround(x))));
  }
  texts.push_back("10");
  texts.push_back("10.0");
  texts.push_back("10.000000000000001");
  for (const Bounds& b : cases) {
    std::optional<DecimalBound> lo, hi;
    if (b.lo) lo = DecimalFromDouble(*b.lo, b.lo_excl);
    if (b.hi) hi = DecimalFromDouble(*b.hi, b.hi_excl);
    auto e = NumberRange(lo, hi);
    ASSERT_TRUE(e.ok()) << e.status();
    Grammar g;
    g.set_root(g.AddRule("root"));
    g.SetBody(g.root(), *e);
    auto c = MustCompile(g, v);
    for (const std::string& t : texts) {
      if (t == "-0.00" || t == "-0" || t.rfind("-0.000", 0) == 0) continue;  // not written by the grammar
      const double x = std::stod(t);
      bool in = true;
      if (b.lo) in = in && (b.lo_excl ? x > *b.lo : x >= *b.lo);
      if (b.hi) in = in && (b.hi_excl ? x < *b.hi : x <= *b.hi);
      EXPECT_EQ(Matches(c, t), in) << t << " bounds " << (b.lo ? *b.lo : -1e9) << (b.lo_excl ? " (excl) " : " ")
                                   << (b.hi ? *b.hi : 1e9) << (b.hi_excl ? " (excl)" : "");
    }
  }
  EXPECT_FALSE(NumberRange(DecimalFromDouble(1.0, true), DecimalFromDouble(1.0, false)).ok());
}

}  // namespace
}  // namespace sparkserve::text::constraint
