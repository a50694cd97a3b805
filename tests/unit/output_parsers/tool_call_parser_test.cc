// ToolCallParser: XML and JSON forms, several calls among content, values with newlines and markup
// characters, malformed calls falling back to the raw text, and chunking independence.
#include "text/output/tool_call_parser.h"

#include <random>

#include "chunking.h"
#include "gtest/gtest.h"

namespace sparkserve::text {
namespace {

using nlohmann::json;

ToolSchemas WeatherSchemas() {
  auto schemas = ToolSchemas::FromTools(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                     "overwrite": {"type": "boolean"}, "mode": {"type": ["integer", "null"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
      "properties": {"query": {"type": "string"}, "filters": {"type": "object"},
                     "tags": {"type": "array"}, "limit": {"type": "number"}}}}}
  ])"));
  EXPECT_TRUE(schemas.ok());
  return *schemas;
}

struct Outcome {
  OutputEvents events;
  ParsedOutput parsed;
};

Outcome Parse(const std::vector<std::string>& pieces, bool xml = true, bool json_form = true) {
  ToolCallParser parser({.accept_xml = xml, .accept_json = json_form, .schemas = WeatherSchemas(),
                         .make_id = testing::CountingIds()});
  Outcome r;
  r.events = testing::RunPieces(
      pieces, [&](std::string_view p, OutputEvents& out) { parser.Feed(p, out); },
      [&](OutputEvents& out) { parser.Finish(out); });
  r.parsed = testing::Accumulate(r.events);
  return r;
}

// Parses whole, one character at a time and in random chunkings; all must agree, and content plus
// each call's raw markup must rebuild the input exactly.
ParsedOutput ParseEveryWay(std::string_view text, bool xml = true, bool json_form = true) {
  Outcome whole = Parse({std::string(text)}, xml, json_form);
  EXPECT_EQ(testing::Reconstruct(whole.events), text);
  for (const auto& pieces : testing::AllChunkings(text)) {
    Outcome r = Parse(pieces, xml, json_form);
    EXPECT_EQ(r.parsed, whole.parsed) << "pieces: " << pieces.size();
    EXPECT_EQ(testing::Reconstruct(r.events), text);
  }
  return whole.parsed;
}

ParsedToolCall Call(int i, std::string name, std::string arguments) {
  return ParsedToolCall{.id = "call_" + std::to_string(i), .name = std::move(name),
                        .arguments = std::move(arguments)};
}

TEST(ToolCallParser, XmlCallsInterleavedWithContent) {
  std::string text =
      "I'll check both cities.\n\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n"
      "</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n</parameter>\n"
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  EXPECT_EQ(p.content, "I'll check both cities.\n\n\n");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0],
            Call(0, "get_weather", R"({"city": "Paris", "days": 3, "unit": "celsius"})"));
  EXPECT_EQ(p.tool_calls[1], Call(1, "get_weather", R"({"city": "東京", "days": 2})"));
}

TEST(ToolCallParser, EventsComeInOrderWithIndexAndIdAndRawMarkup) {
  std::string call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
                     "</function>\n</tool_call>";
  Outcome r = Parse({"before " + call + " after"});
  ASSERT_EQ(r.events.size(), 5u);
  EXPECT_EQ(r.events[0], OutputEvent::Content("before "));
  EXPECT_EQ(r.events[1].kind, OutputEventKind::kToolCallStart);
  EXPECT_EQ(r.events[1].index, 0);
  EXPECT_EQ(r.events[1].id, "call_0");
  EXPECT_EQ(r.events[1].name, "get_weather");
  EXPECT_EQ(r.events[2].kind, OutputEventKind::kToolCallArgumentsDelta);
  EXPECT_EQ(r.events[2].text, R"({"city": "Rome"})");
  EXPECT_EQ(r.events[3].kind, OutputEventKind::kToolCallEnd);
  EXPECT_EQ(r.events[3].text, call);
  EXPECT_EQ(r.events[4], OutputEvent::Content(" after"));
}

TEST(ToolCallParser, ContentBeforeACallIsReleasedBeforeTheCallCompletes) {
  ToolCallParser parser({.schemas = WeatherSchemas(), .make_id = testing::CountingIds()});
  OutputEvents out;
  parser.Feed("Sure.\n\n<tool_call>\n<function=get_weather>\n<parameter=ci", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], OutputEvent::Content("Sure.\n\n"));
  parser.Feed("ty>\nOslo\n</parameter>\n</function>\n</tool_call", out);
  EXPECT_EQ(out.size(), 1u) << "nothing is decided before </tool_call> is complete";
  parser.Feed(">", out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].kind, OutputEventKind::kToolCallStart);
}

TEST(ToolCallParser, ValuesWithNewlinesAndMarkupCharacters) {
  std::string code =
      "<html>\n<body>\n  <p>a < b && c > d</p>\n  <tool in prose>\n</body>\n</html>\n";
  std::string text = "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/x.html\n"
                     "</parameter>\n<parameter=content>\n" + code +
                     "\n</parameter>\n<parameter=overwrite>\nTrue\n</parameter>\n"
                     "<parameter=mode>\nNone\n</parameter>\n</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  json args = json::parse(p.tool_calls[0].arguments);
  EXPECT_EQ(args["path"], "/tmp/x.html");
  EXPECT_EQ(args["content"], code);  // only the one newline before </parameter> is markup
  EXPECT_EQ(args["overwrite"], true);
  EXPECT_TRUE(args["mode"].is_null());
}

TEST(ToolCallParser, LiteralClosingTagsInsideValues) {
  // "</parameter>" followed by prose is value text; so is a whole quoted call at line starts.
  std::string value =
      "Close tags with </parameter> and then write more.\n"
      "Example:\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n"
      "</tool_call>\nend";
  std::string text = "<tool_call>\n<function=write_file>\n<parameter=content>\n" + value +
                     "\n</parameter>\n<parameter=path>\nnotes.md\n</parameter>\n</function>\n"
                     "</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  json args = json::parse(p.tool_calls[0].arguments);
  EXPECT_EQ(args["content"], value);
  EXPECT_EQ(args["path"], "notes.md");
}

TEST(ToolCallParser, UndeclaredParameterIsStillAParameter) {
  std::string text = "<tool_call>\n<function=write_file>\n<parameter=content>\nx\n</parameter>\n"
                     "<parameter=other>\n7\n</parameter>\n</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"content": "x", "other": "7"})");
}

TEST(ToolCallParser, UnknownFunctionKeepsTextValuesAndAnyNextParameterCloses) {
  std::string text = "<tool_call>\n<function=mystery>\n<parameter=n>\n42\n</parameter>\n"
                     "<parameter=flag>\ntrue\n</parameter>\n</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"n": "42", "flag": "true"})");
}

TEST(ToolCallParser, TypedValuesFollowTheSchema) {
  std::string text =
      "<tool_call>\n<function=search>\n<parameter=query>\n12\n</parameter>\n"
      "<parameter=filters>\n{\"lang\": \"fr\", \"year\": 2020}\n</parameter>\n"
      "<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=limit>\n10.0\n</parameter>\n"
      "<parameter=extra>\n[1]\n</parameter>\n</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments,
            R"({"query": "12", "filters": {"lang": "fr", "year": 2020}, "tags": ["a", "b"], )"
            R"("limit": 10, "extra": "[1]"})");
}

TEST(ToolCallParser, RepeatedParameterKeepsFirstPositionAndLastValue) {
  std::string text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n"
                     "<parameter=days>\n1\n</parameter>\n<parameter=city>\nB\n</parameter>\n"
                     "</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "B", "days": 1})");
}

TEST(ToolCallParser, LenientWhitespaceAndMissingFunctionClose) {
  // No newlines at all, and </function> left out: still a call.
  ParsedOutput p = ParseEveryWay(
      "<tool_call><function=get_weather><parameter=city>Lima</parameter></tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Lima"})");
  // A call without parameters.
  p = ParseEveryWay("<tool_call>\n<function=noargs>\n</function>\n</tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
}

TEST(ToolCallParser, JsonForm) {
  std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": "
      "\"what is </tool_call> in 🙂?\", \"limit\": 5}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Kyiv\\\"}\"}\n"
      "</tool_call>";
  ParsedOutput p = ParseEveryWay(text);
  EXPECT_EQ(p.content, "Let me look.\n\n");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0],
            Call(0, "search", R"({"query": "what is </tool_call> in 🙂?", "limit": 5})"));
  EXPECT_EQ(p.tool_calls[1], Call(1, "get_weather", R"({"city": "Kyiv"})"));
}

TEST(ToolCallParser, FormsCanBeSwitchedOff) {
  std::string json_call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  std::string xml_call = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
  EXPECT_EQ(ParseEveryWay(json_call, /*xml=*/true, /*json=*/false).content, json_call);
  EXPECT_EQ(ParseEveryWay(xml_call, /*xml=*/false, /*json=*/true).content, xml_call);
  EXPECT_EQ(ParseEveryWay(json_call, /*xml=*/false, /*json=*/true).tool_calls.size(), 1u);
}

TEST(ToolCallParser, MalformedCallsAreRawContent) {
  const std::vector<std::string> malformed = {
      // unclosed at the end (several places)
      "<tool_call>",
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n",
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>",
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
      "<tool_call>\n<function=get_weath",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
      "<tool_call>\n{\"name\": \"f\", \"argu",
      // missing or invalid function name
      "<tool_call>\n<function=>\n</function>\n</tool_call>",
      "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",
      "<tool_call>\n<function={{ tc.name }}>\n</function>\n</tool_call>",
      "<tool_call>\nhello there\n</tool_call>",
      "<tool_call></tool_call>",
      // text where markup must be
      "<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\n</function>\nnot a close",
      "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n<parameter=b>\n2\n</function>\n"
      "</tool_call>",
      // bad JSON
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}\n</tool_call>",
      "<tool_call>\n{name: f}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
      "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing\n</tool_call>",
  };
  for (const std::string& text : malformed) {
    ParsedOutput p = ParseEveryWay(text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.tool_calls.empty()) << text;
  }
}

TEST(ToolCallParser, AWellFormedCallAfterAMalformedOneIsFound) {
  std::string bad = "<tool_call>\nI was going to call a tool.\n";
  std::string good = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNice\n</parameter>\n"
                     "</function>\n</tool_call>";
  ParsedOutput p = ParseEveryWay(bad + good + " done");
  EXPECT_EQ(p.content, bad + " done");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Nice"})");
  // A malformed call whose text contains a complete call: that inner call is found.
  p = ParseEveryWay("<tool_call>\n<function=bad name>\n" + good);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.content, "<tool_call>\n<function=bad name>\n");
}

TEST(ToolCallParser, ProseThatLooksLikeMarkup) {
  std::string text = "Compare a < b and a <= b. The <tool tag, <tool_call in prose, "
                     "<tool_call> as a word, </tool_call>, <function=x> and <<tool_call>>.";
  ParsedOutput p = ParseEveryWay(text);
  EXPECT_EQ(p.content, text);
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ToolCallParser, DefaultIdsAreRandomAndWellFormed) {
  ToolCallParser parser({});
  OutputEvents out;
  parser.Feed("<tool_call>\n<function=a>\n</function>\n</tool_call>"
              "<tool_call>\n<function=b>\n</function>\n</tool_call>", out);
  parser.Finish(out);
  ParsedOutput p = testing::Accumulate(out);
  ASSERT_EQ(p.tool_calls.size(), 2u);
  for (const auto& c : p.tool_calls) {
    ASSERT_EQ(c.id.size(), 5u + 24u) << c.id;
    EXPECT_TRUE(c.id.starts_with("call_"));
    EXPECT_EQ(c.id.find_first_not_of("0123456789abcdef", 5), std::string::npos) << c.id;
  }
  EXPECT_NE(p.tool_calls[0].id, p.tool_calls[1].id);
}

// Random outputs assembled from well-formed calls, malformed fragments and prose: any chunking gives
// the same result, nothing is lost, and nothing throws.
TEST(ToolCallParser, PropertyRandomOutputsAreChunkingIndependentAndLossless) {
  static const std::vector<std::string> kFragments = {
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
      "</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"}\"}]}}\n</tool_call>",
      "<tool_call>", "</tool_call>", "<function=get_weather>", "<function=", "<parameter=city>",
      "<parameter=days>", "</parameter>", "</function>", "\n", " ", "<", ">", "{", "}", "\"",
      "text", "é", "🙂", "a < b", "<tool", "42", "\xEF\xBF\xBD"};
  std::mt19937 rng(77);
  std::uniform_int_distribution<size_t> count(0, 20);
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  for (int iteration = 0; iteration < 400; ++iteration) {
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += kFragments[pick(rng)];
    Outcome whole = Parse({text});
    ASSERT_EQ(testing::Reconstruct(whole.events), text);
    for (const auto& pieces : testing::AllChunkings(text, 3)) {
      Outcome r = Parse(pieces);
      ASSERT_EQ(r.parsed, whole.parsed) << text;
      ASSERT_EQ(testing::Reconstruct(r.events), text);
    }
    for (const auto& call : whole.parsed.tool_calls) {
      ASSERT_TRUE(json::accept(call.arguments)) << call.arguments;
    }
  }
}

}  // namespace
}  // namespace sparkserve::text
