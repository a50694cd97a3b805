// Schema-typed conversion of XML parameter values (vLLM qwen3_coder rules) and the Python-style
// JSON serialisation of arguments.
#include "text/output/tool_schema.h"

#include "gtest/gtest.h"
#include "text/output/python_json.h"

namespace sparkserve::text {
namespace {

using nlohmann::json;

std::string Convert(std::string_view text, const json& schema) {
  return DumpPythonStyleJson(ConvertParameterValue(text, &schema));
}

TEST(PythonStyleJson, MatchesPythonJsonDumps) {
  // Expected text produced by CPython: json.dumps(value, ensure_ascii=False).
  nlohmann::ordered_json v = nlohmann::ordered_json::parse(
      R"({"a": 1, "b": [1, 2.5, null, true], "c": {"d": "é\n\t\"\\\u0001"}, "e": 1e-07,
          "f": 1.5e+300, "g": 0.1, "h": -0.0, "i": 123456789.125})");
  EXPECT_EQ(DumpPythonStyleJson(v),
            "{\"a\": 1, \"b\": [1, 2.5, null, true], \"c\": {\"d\": \"é\\n\\t\\\"\\\\\\u0001\"}, "
            "\"e\": 1e-07, \"f\": 1.5e+300, \"g\": 0.1, \"h\": -0.0, \"i\": 123456789.125}");
  EXPECT_EQ(DumpPythonStyleJson(nlohmann::ordered_json::object()), "{}");
  EXPECT_EQ(DumpPythonStyleJson(nlohmann::ordered_json::array()), "[]");
}

TEST(PythonStyleJson, KeepsInsertionOrder) {
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  v["zeta"] = 1;
  v["alpha"] = 2;
  v["mid"] = 3;
  EXPECT_EQ(DumpPythonStyleJson(v), R"({"zeta": 1, "alpha": 2, "mid": 3})");
}

TEST(ConvertParameterValue, StringsStayStrings) {
  for (const char* type : {"string", "str", "text", "varchar", "char", "enum", "STRING"}) {
    EXPECT_EQ(Convert("42", json{{"type", type}}), "\"42\"") << type;
    EXPECT_EQ(Convert("null", json{{"type", type}}), "\"null\"") << type;
  }
  EXPECT_EQ(Convert("  spaced <b>\n", json{{"type", "string"}}), "\"  spaced <b>\\n\"");
}

TEST(ConvertParameterValue, UndeclaredOrUntypedIsText) {
  EXPECT_EQ(DumpPythonStyleJson(ConvertParameterValue("123", nullptr)), "\"123\"");
  EXPECT_EQ(Convert("[1, 2]", json{{"description", "no type"}}), "\"[1, 2]\"");
}

TEST(ConvertParameterValue, Integers) {
  json t = {{"type", "integer"}};
  EXPECT_EQ(Convert("3", t), "3");
  EXPECT_EQ(Convert(" -17 \n", t), "-17");
  EXPECT_EQ(Convert("+5", t), "5");
  EXPECT_EQ(Convert("1_000", t), "1000");
  EXPECT_EQ(Convert("9223372036854775807", t), "9223372036854775807");
  EXPECT_EQ(Convert("-9223372036854775808", t), "-9223372036854775808");
  EXPECT_EQ(Convert("3.5", t), "\"3.5\"");
  EXPECT_EQ(Convert("three", t), "\"three\"");
  EXPECT_EQ(Convert("1__0", t), "\"1__0\"");
  EXPECT_EQ(Convert("", t), "\"\"");
  EXPECT_EQ(Convert("None", t), "null");
  EXPECT_EQ(Convert("99999999999999999999999", t), "\"99999999999999999999999\"");
  for (const char* type : {"int", "int64", "uint32", "long", "short", "unsigned"}) {
    EXPECT_EQ(Convert("7", json{{"type", type}}), "7") << type;
  }
}

TEST(ConvertParameterValue, Numbers) {
  json t = {{"type", "number"}};
  EXPECT_EQ(Convert("3.25", t), "3.25");
  EXPECT_EQ(Convert("3.0", t), "3");  // integral floats become ints, as in vLLM
  EXPECT_EQ(Convert("1e3", t), "1000");
  EXPECT_EQ(Convert(" -0.5 ", t), "-0.5");
  EXPECT_EQ(Convert(".5", t), "0.5");
  EXPECT_EQ(Convert("1e-07", t), "1e-07");
  EXPECT_EQ(Convert("inf", t), "\"inf\"");
  EXPECT_EQ(Convert("nan", t), "\"nan\"");
  EXPECT_EQ(Convert("1e400", t), "\"1e400\"");
  EXPECT_EQ(Convert("0x10", t), "\"0x10\"");
  EXPECT_EQ(Convert("12 apples", t), "\"12 apples\"");
  EXPECT_EQ(Convert("2.5", json{{"type", "float"}}), "2.5");
}

TEST(ConvertParameterValue, Booleans) {
  json t = {{"type", "boolean"}};
  EXPECT_EQ(Convert("true", t), "true");
  EXPECT_EQ(Convert("True", t), "true");  // the Qwen3.5 template renders Python's str(True)
  EXPECT_EQ(Convert("FALSE", t), "false");
  EXPECT_EQ(Convert("yes", t), "\"yes\"");  // vLLM would say false; the text is kept instead
  EXPECT_EQ(Convert("false", json{{"type", "bool"}}), "false");
}

TEST(ConvertParameterValue, ObjectsAndArrays) {
  EXPECT_EQ(Convert(R"({"b": 1, "a": [true, null]})", json{{"type", "object"}}),
            R"({"b": 1, "a": [true, null]})");
  EXPECT_EQ(Convert("[1,2,\"x\"]", json{{"type", "array"}}), R"([1, 2, "x"])");
  EXPECT_EQ(Convert("{broken", json{{"type", "object"}}), R"("{broken")");
  EXPECT_EQ(Convert("{'a': 1}", json{{"type", "object"}}), R"("{'a': 1}")");
  // JSON text that itself encodes a JSON document.
  EXPECT_EQ(Convert(R"("{\"k\": 2}")", json{{"type", "object"}}), R"({"k": 2})");
  EXPECT_EQ(Convert("[1]", json{{"type", "list[int]"}}), "[1]");
}

TEST(ConvertParameterValue, Nullable) {
  EXPECT_EQ(Convert("null", json{{"type", json::array({"string", "null"})}}), "null");
  EXPECT_EQ(Convert("None", json{{"anyOf", json::array({{{"type", "string"}}, {{"type", "null"}}})}}),
            "null");
  EXPECT_EQ(Convert("text", json{{"anyOf", json::array({{{"type", "string"}}, {{"type", "null"}}})}}),
            "\"text\"");
  EXPECT_EQ(Convert("5", json{{"anyOf", json::array({{{"type", "null"}}, {{"type", "integer"}}})}}),
            "5");
  EXPECT_EQ(Convert("5", json{{"type", json::array({"integer", "null"})}}), "5");
}

TEST(ConvertParameterValue, UnknownTypeTriesJsonThenText) {
  json t = {{"type", "any"}};
  EXPECT_EQ(Convert("12", t), "12");
  EXPECT_EQ(Convert("{\"a\":1}", t), "{\"a\": 1}");
  EXPECT_EQ(Convert("hello", t), "\"hello\"");
}

TEST(ToolSchemas, ReadsOpenAiAndAnthropicTools) {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"name": "calc", "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}}},
    {"type": "function", "function": {"name": "noargs"}}
  ])");
  auto schemas = ToolSchemas::FromTools(tools);
  ASSERT_TRUE(schemas.ok()) << schemas.status();
  ASSERT_NE(schemas->Properties("get_weather"), nullptr);
  EXPECT_TRUE(schemas->Properties("get_weather")->contains("city"));
  ASSERT_NE(schemas->Properties("calc"), nullptr);
  EXPECT_TRUE(schemas->Properties("calc")->contains("x"));
  EXPECT_EQ(schemas->Properties("noargs"), nullptr);
  EXPECT_EQ(schemas->Properties("missing"), nullptr);
}

TEST(ToolSchemas, RejectsMalformedTools) {
  EXPECT_FALSE(ToolSchemas::FromTools(json::object()).ok());
  auto no_name = ToolSchemas::FromTools(json::parse(R"([{"type": "function", "function": {}}])"));
  ASSERT_FALSE(no_name.ok());
  EXPECT_NE(std::string(no_name.status().message()).find("tools[0]"), std::string::npos);
  EXPECT_FALSE(ToolSchemas::FromTools(json::parse(R"([3])")).ok());
  EXPECT_FALSE(ToolSchemas::FromTools(json::parse(R"([{"function": "x"}])")).ok());
  EXPECT_TRUE(ToolSchemas::FromTools(json()).ok());
}

}  // namespace
}  // namespace sparkserve::text
