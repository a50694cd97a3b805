// OutputParser: recorded-style Qwen3.5 / Qwen3 outputs (reasoning + content + several tool calls)
// parsed whole, one character at a time and in seeded random chunkings give the same structures;
// configuration by family, tools and prompt state.
#include "text/output/output_parser.h"

#include <random>

#include "chunking.h"
#include "gtest/gtest.h"

namespace sparkserve::text {
namespace {

using nlohmann::json;

ToolSchemas Schemas() {
  auto schemas = ToolSchemas::FromTools(json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "run_python", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}, "timeout": {"type": "number"},
                     "env": {"type": "object"}, "dry_run": {"type": "boolean"}}}}}
  ])"));
  EXPECT_TRUE(schemas.ok());
  return *schemas;
}

OutputParserOptions Qwen35(bool tools, bool inside) {
  OutputParserOptions o = OutputParserOptions::ForFamily(ModelFamily::kQwen3_5);
  if (tools) o.WithTools(Schemas());
  o.StartingInReasoning(inside);
  o.make_tool_call_id = testing::CountingIds();
  return o;
}

struct Outcome {
  OutputEvents events;
  ParsedOutput parsed;
};

Outcome Parse(OutputParserOptions options, const std::vector<std::string>& pieces) {
  OutputParser parser(std::move(options));
  Outcome r;
  r.events = testing::RunPieces(
      pieces,
      [&](std::string_view p, OutputEvents& out) {
        OutputEvents e = parser.Feed(p);
        out.insert(out.end(), e.begin(), e.end());
      },
      [&](OutputEvents& out) {
        OutputEvents e = parser.Finish();
        out.insert(out.end(), e.begin(), e.end());
      });
  r.parsed = testing::Accumulate(r.events);
  return r;
}

std::string WithoutThinkTags(std::string text) {
  // Test inputs here hold at most one open and one close tag, both markup.
  for (std::string_view tag : {"<think>", "</think>"}) {
    size_t pos = text.find(tag);
    if (pos != std::string::npos) text.erase(pos, tag.size());
  }
  return text;
}

// Whole, per character and random chunkings must agree; the ordered text of all deltas plus raw
// call markup must be the input minus the think tags; ids must be fresh per parser.
ParsedOutput ParseEveryWay(const std::function<OutputParserOptions()>& options,
                           const std::string& text) {
  Outcome whole = Parse(options(), {text});
  EXPECT_EQ(testing::Reconstruct(whole.events), WithoutThinkTags(text));
  for (const auto& pieces : testing::AllChunkings(text, 30)) {
    Outcome r = Parse(options(), pieces);
    EXPECT_EQ(r.parsed, whole.parsed) << "pieces: " << pieces.size();
    EXPECT_EQ(testing::Reconstruct(r.events), testing::Reconstruct(whole.events));
  }
  EXPECT_EQ(ParseCompleteOutput(options(), text), whole.parsed);
  return whole.parsed;
}

// A Qwen3.5 turn: the prompt ended "<think>\n"; reasoning mentions markup-like text; two XML calls.
const char kQwen35Recorded[] =
    "The user wants the weather in Paris and Tokyo. I should call get_weather twice.\n"
    "Temperatures < 0 °C are possible in January, so I'll ask for \"celsius\". "
    "The answer needs <tool_call> blocks, one per city; <tool_call>s are not text.\n"
    "</think>\n\n"
    "I'll check both cities for you 🌦️.\n\n"
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n"
    "</tool_call>\n"
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n</parameter>\n"
    "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>";

TEST(OutputParser, RecordedQwen35ReasoningContentAndCalls) {
  ParsedOutput p = ParseEveryWay([] { return Qwen35(true, true); }, kQwen35Recorded);
  std::string text = kQwen35Recorded;
  EXPECT_EQ(p.reasoning, text.substr(0, text.find("</think>")));
  EXPECT_EQ(p.content, "\n\nI'll check both cities for you 🌦️.\n\n\n");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].id, "call_0");
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Paris", "days": 3, "unit": "celsius"})");
  EXPECT_EQ(p.tool_calls[1].id, "call_1");
  EXPECT_EQ(p.tool_calls[1].arguments, R"({"city": "東京", "days": 2})");
}

// Code-writing turn: values with newlines, "<", a literal "</parameter>", typed values.
const char kCodeRecorded[] =
    "Plan: write the script, then run it with a timeout.\n</think>\n\n"
    "Running it now:\n"
    "<tool_call>\n<function=run_python>\n<parameter=code>\n"
    "import sys\n"
    "def lt(a, b):\n"
    "    return a < b  # <tool is not a tag\n"
    "print(\"<tool_call>\" if lt(1, 2) else \"</parameter> in a string\")\n"
    "if sys.argv[1:] and sys.argv[1] <= '9':\n"
    "    print('é, 中文, \xEF\xBF\xBD')\n"
    "\n</parameter>\n"
    "<parameter=timeout>\n2.5\n</parameter>\n"
    "<parameter=env>\n{\"PYTHONIOENCODING\": \"utf-8\", \"DEBUG\": 1}\n</parameter>\n"
    "<parameter=dry_run>\nFalse\n</parameter>\n"
    "</function>\n</tool_call>";

TEST(OutputParser, RecordedCodeCallWithMarkupInValues) {
  ParsedOutput p = ParseEveryWay([] { return Qwen35(true, true); }, kCodeRecorded);
  EXPECT_EQ(p.reasoning, "Plan: write the script, then run it with a timeout.\n");
  EXPECT_EQ(p.content, "\n\nRunning it now:\n");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  json args = json::parse(p.tool_calls[0].arguments);
  EXPECT_EQ(args["code"],
            "import sys\n"
            "def lt(a, b):\n"
            "    return a < b  # <tool is not a tag\n"
            "print(\"<tool_call>\" if lt(1, 2) else \"</parameter> in a string\")\n"
            "if sys.argv[1:] and sys.argv[1] <= '9':\n"
            "    print('é, 中文, \xEF\xBF\xBD')\n");
  EXPECT_EQ(args["timeout"], 2.5);
  EXPECT_EQ(args["env"], json::parse(R"({"PYTHONIOENCODING": "utf-8", "DEBUG": 1})"));
  EXPECT_EQ(args["dry_run"], false);
  EXPECT_EQ(p.tool_calls[0].arguments.find("{\"code\": "), 0u) << "keys in emitted order";
}

// A Qwen3 turn (the model opens <think> itself) with JSON-form calls.
const char kQwen3Recorded[] =
    "<think>\nOkay, the user asks for two forecasts. Let me call the tool.\n</think>\n\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"São Paulo\", \"days\": 1}}"
    "\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>";

TEST(OutputParser, RecordedQwen3JsonCalls) {
  auto options = [] {
    OutputParserOptions o = OutputParserOptions::ForFamily(ModelFamily::kQwen3);
    o.WithTools(Schemas());
    o.make_tool_call_id = testing::CountingIds();
    return o;
  };
  ParsedOutput p = ParseEveryWay(options, kQwen3Recorded);
  EXPECT_EQ(p.reasoning, "\nOkay, the user asks for two forecasts. Let me call the tool.\n");
  EXPECT_EQ(p.content, "\n\n\n");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "São Paulo", "days": 1})");
  EXPECT_EQ(p.tool_calls[1].arguments, R"({"city": "Zürich"})");
}

// Qwen3.5 calling a tool without closing </think>: the call ends the reasoning.
const char kUnclosedThinkRecorded[] =
    "I need the forecast first; mentioning <tool_call> here changes nothing.\n\n"
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nLagos\n</parameter>\n</function>\n"
    "</tool_call>";

TEST(OutputParser, RecordedCallInsideUnclosedReasoningEndsIt) {
  ParsedOutput p = ParseEveryWay([] { return Qwen35(true, true); }, kUnclosedThinkRecorded);
  EXPECT_EQ(p.reasoning,
            "I need the forecast first; mentioning <tool_call> here changes nothing.\n\n");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Lagos"})");
}

TEST(OutputParser, ToolCallsInsideReasoningAreNotParsedWhenImplicitEndIsOff) {
  auto options = [] {
    OutputParserOptions o = Qwen35(true, true);
    o.tool_call_ends_reasoning = false;
    return o;
  };
  ParsedOutput p = ParseEveryWay(options, kUnclosedThinkRecorded);
  EXPECT_EQ(p.reasoning, kUnclosedThinkRecorded);
  EXPECT_TRUE(p.tool_calls.empty());
  // Without tools there is no implicit end either.
  p = ParseEveryWay([] { return Qwen35(false, true); }, kUnclosedThinkRecorded);
  EXPECT_EQ(p.reasoning, kUnclosedThinkRecorded);
}

TEST(OutputParser, Qwen3FamilyDoesNotReadTheXmlForm) {
  OutputParserOptions o = OutputParserOptions::ForFamily(ModelFamily::kQwen3);
  o.WithTools(Schemas());
  std::string xml = "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>";
  ParsedOutput p = ParseCompleteOutput(o, xml);
  EXPECT_EQ(p.content, xml);
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(OutputParser, NoToolsMeansNoToolParsing) {
  ParsedOutput p = ParseEveryWay([] { return Qwen35(false, true); }, kQwen35Recorded);
  EXPECT_TRUE(p.tool_calls.empty());
  std::string text = kQwen35Recorded;
  EXPECT_EQ(p.content, text.substr(text.find("</think>") + 8));
}

TEST(OutputParser, FamilyNoneLeavesEverythingAsContent) {
  auto options = [] {
    OutputParserOptions o = OutputParserOptions::ForFamily(ModelFamily::kNone);
    o.WithTools(Schemas());
    o.StartingInReasoning(true);
    return o;
  };
  Outcome r = Parse(options(), testing::OneCharacterPerPiece(kQwen35Recorded));
  EXPECT_EQ(r.parsed.content, kQwen35Recorded);
  EXPECT_EQ(r.parsed.reasoning, "");
  EXPECT_TRUE(r.parsed.tool_calls.empty());
}

TEST(OutputParser, ReasoningCanBeSwitchedOffForThinkingDisabledPrompts) {
  OutputParserOptions o = Qwen35(true, false);
  o.parse_reasoning = false;
  ParsedOutput p = ParseCompleteOutput(o, "<think>x</think>y");
  EXPECT_EQ(p.content, "<think>x</think>y");
}

TEST(OutputParser, TruncatedOutputsKeepEverything) {
  std::string text = kQwen35Recorded;
  // Cut at every position: nothing is lost, nothing throws, and the structures still agree across
  // chunkings (an unfinished call is plain content).
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    std::string prefix = text.substr(0, cut);
    if (!prefix.empty() && (static_cast<unsigned char>(prefix.back()) & 0x80)) continue;
    Outcome whole = Parse(Qwen35(true, true), {prefix});
    Outcome chars = Parse(Qwen35(true, true), testing::OneCharacterPerPiece(prefix));
    ASSERT_EQ(whole.parsed, chars.parsed) << cut;
    ASSERT_EQ(testing::Reconstruct(whole.events), WithoutThinkTags(prefix)) << cut;
  }
  ParsedOutput p = ParseCompleteOutput(Qwen35(true, true),
                                       text.substr(0, text.rfind("</tool_call>")));
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_TRUE(p.content.ends_with("<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n"
                                  "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n"));
}

TEST(OutputParser, PropertyRandomOutputsAreChunkingIndependent) {
  static const std::vector<std::string> kFragments = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "\n", " ", "<", "</", "<th", "x",
      "<function=get_weather>", "<parameter=city>", "</parameter>", "</function>", "{", "}",
      "<tool_call>\n<function=get_weather>\n<parameter=days>\n4\n</parameter>\n</function>\n"
      "</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "é", "🙂", "a < b"};
  std::mt19937 rng(4242);
  std::uniform_int_distribution<size_t> count(0, 16);
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += kFragments[pick(rng)];
    bool inside = iteration % 2 == 0;
    Outcome whole = Parse(Qwen35(true, inside), {text});
    std::string rebuilt = testing::Reconstruct(whole.events);
    size_t removed = text.size() - rebuilt.size();
    ASSERT_TRUE(removed == 0 || removed == 7 || removed == 8 || removed == 15) << text;
    for (const auto& pieces : testing::AllChunkings(text, 3)) {
      Outcome r = Parse(Qwen35(true, inside), pieces);
      ASSERT_EQ(r.parsed, whole.parsed) << text;
      ASSERT_EQ(testing::Reconstruct(r.events), rebuilt) << text;
    }
  }
}

TEST(OutputParser, PromptOpensReasoning) {
  EXPECT_TRUE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(PromptOpensReasoning("...<think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(PromptOpensReasoning(""));
}

TEST(OutputParser, ParseModelFamily) {
  EXPECT_EQ(*ParseModelFamily("qwen3_5"), ModelFamily::kQwen3_5);
  EXPECT_EQ(*ParseModelFamily("qwen3.5"), ModelFamily::kQwen3_5);
  EXPECT_EQ(*ParseModelFamily("qwen3"), ModelFamily::kQwen3);
  EXPECT_EQ(*ParseModelFamily("none"), ModelFamily::kNone);
  auto bad = ParseModelFamily("llama");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("llama"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::text
