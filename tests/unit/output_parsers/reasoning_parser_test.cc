// ReasoningParser: <think> splitting, held partial tags, end-of-stream flush, and the property that
// reasoning + content is the input minus the markup, for any chunking.
#include "text/output/reasoning_parser.h"

#include <random>

#include "chunking.h"
#include "gtest/gtest.h"

namespace sparkserve::text {
namespace {

using testing::AllChunkings;
using testing::OneCharacterPerPiece;

OutputEvents RunReasoning(const std::vector<std::string>& pieces, bool starts_inside) {
  ReasoningParser parser({.starts_in_reasoning = starts_inside});
  return testing::RunPieces(
      pieces, [&](std::string_view p, OutputEvents& out) { parser.Feed(p, out); },
      [&](OutputEvents& out) { parser.Finish(out); });
}

ParsedOutput Parse(std::string_view text, bool starts_inside) {
  return testing::Accumulate(RunReasoning({std::string(text)}, starts_inside));
}

ParsedOutput RC(std::string reasoning, std::string content) {
  ParsedOutput p;
  p.reasoning = std::move(reasoning);
  p.content = std::move(content);
  return p;
}

TEST(ReasoningParser, StartsInsideKeepsNewlinesAroundTags) {
  // Qwen3.5 generation prompt ends "<think>\n"; the model writes reasoning, "\n</think>\n\n", answer.
  EXPECT_EQ(Parse("Let me think.\n</think>\n\nThe answer is 4.", true),
            RC("Let me think.\n", "\n\nThe answer is 4."));
}

TEST(ReasoningParser, ModelOpensThinkItself) {
  EXPECT_EQ(Parse("<think>\nhmm\n</think>\n\nHi", false), RC("\nhmm\n", "\n\nHi"));
  // Text before <think> is content, kept.
  EXPECT_EQ(Parse("  \n<think>x</think>y", false), RC("x", "  \ny"));
}

TEST(ReasoningParser, RepeatedOpenTagAtStartIsMarkupWhenStartingInside) {
  EXPECT_EQ(Parse("<think>\nplan\n</think>\n\nok", true), RC("\nplan\n", "\n\nok"));
  // Elsewhere inside the block it is reasoning text.
  EXPECT_EQ(Parse("a <think> b</think>c", true), RC("a <think> b", "c"));
}

TEST(ReasoningParser, NoTagsMeansAllOneKind) {
  EXPECT_EQ(Parse("plain answer", false), RC("", "plain answer"));
  EXPECT_EQ(Parse("truncated reasoning", true), RC("truncated reasoning", ""));
}

TEST(ReasoningParser, OnlyOneBlockTagsAfterItAreContent) {
  EXPECT_EQ(Parse("r</think>use <think> and </think> tags", true),
            RC("r", "use <think> and </think> tags"));
  // A closing tag with no open block is text.
  EXPECT_EQ(Parse("a</think>b", false), RC("", "a</think>b"));
}

TEST(ReasoningParser, LeadingWhitespaceAndReplacementCharactersKept) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Parse("\n\n " + fffd + "r" + fffd + "\n</think>\n " + fffd, true),
            RC("\n\n " + fffd + "r" + fffd + "\n", "\n " + fffd));
}

TEST(ReasoningParser, PartialTagIsHeldThenReleased) {
  ReasoningParser parser({.starts_in_reasoning = true});
  OutputEvents out;
  parser.Feed("abc <", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], OutputEvent::Reasoning("abc "));
  out.clear();
  parser.Feed("/thi", out);
  EXPECT_TRUE(out.empty()) << "</thi may still become </think>";
  parser.Feed("s is not a tag", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], OutputEvent::Reasoning("</this is not a tag"));
  out.clear();
  parser.Feed("</th", out);
  parser.Feed("ink>", out);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(parser.in_reasoning());
  parser.Feed("done", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], OutputEvent::Content("done"));
}

TEST(ReasoningParser, HeldTextIsFlushedAsWhatItIsAtTheEnd) {
  {
    ReasoningParser parser({.starts_in_reasoning = true});
    OutputEvents out;
    parser.Feed("cut off </thin", out);
    parser.Finish(out);
    EXPECT_EQ(testing::Accumulate(out), RC("cut off </thin", ""));
  }
  {
    ReasoningParser parser({.starts_in_reasoning = false});
    OutputEvents out;
    parser.Feed("x <thi", out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], OutputEvent::Content("x "));
    parser.Finish(out);
    EXPECT_EQ(testing::Accumulate(out), RC("", "x <thi"));
  }
  {  // A possible repeated "<think>" at the start, cut short.
    ReasoningParser parser({.starts_in_reasoning = true});
    OutputEvents out;
    parser.Feed("<thi", out);
    EXPECT_TRUE(out.empty());
    parser.Finish(out);
    EXPECT_EQ(testing::Accumulate(out), RC("<thi", ""));
  }
}

TEST(ReasoningParser, LessThanInProseIsNotHeldLongerThanNeeded) {
  ReasoningParser parser({.starts_in_reasoning = false});
  OutputEvents out;
  parser.Feed("if a <", out);
  parser.Feed(" b then", out);
  EXPECT_EQ(testing::Accumulate(out), RC("", "if a < b then"));
}

TEST(ReasoningParser, ToolCallEndsReasoningOnlyWhenAFunctionFollows) {
  auto parse = [](std::string_view text) {
    ParsedOutput whole;
    for (const auto& pieces : AllChunkings(text, 10)) {
      ReasoningParser parser({.starts_in_reasoning = true, .tool_call_ends_reasoning = true});
      OutputEvents events = testing::RunPieces(
          pieces, [&](std::string_view p, OutputEvents& out) { parser.Feed(p, out); },
          [&](OutputEvents& out) { parser.Finish(out); });
      ParsedOutput got = testing::Accumulate(events);
      if (pieces.size() == 1) whole = got;
      EXPECT_EQ(got, whole) << text;
      std::string stripped(text);
      if (size_t close = stripped.find("</think>"); close != std::string::npos) {
        stripped.erase(close, 8);
      }
      EXPECT_EQ(testing::Reconstruct(events), stripped);
    }
    return whole;
  };
  EXPECT_EQ(parse("r <tool_call>\n<function=f>\n</function>\n</tool_call>"),
            RC("r ", "<tool_call>\n<function=f>\n</function>\n</tool_call>"));
  EXPECT_EQ(parse("use <tool_call> tags</think>c"), RC("use <tool_call> tags", "c"));
  EXPECT_EQ(parse("a <tool_call> \n <function"), RC("a <tool_call> \n <function", ""));
  EXPECT_EQ(parse("a <tool_call><tool_call><function=g>"), RC("a <tool_call>", "<tool_call><function=g>"));
  // Off by default: the call stays reasoning.
  EXPECT_EQ(Parse("r <tool_call>\n<function=f>", true), RC("r <tool_call>\n<function=f>", ""));
}

// Independent whole-text reference of the rules, returning (reasoning, content) and the text with
// the recognised tags removed.
struct Reference {
  ParsedOutput parsed;
  std::string stripped;
};

Reference ReferenceParse(const std::string& text, bool starts_inside) {
  Reference r;
  auto split_block = [&](std::string body, std::string content_before) {
    size_t close = body.find("</think>");
    r.parsed.content = content_before;
    if (close == std::string::npos) {
      r.parsed.reasoning = body;
    } else {
      r.parsed.reasoning = body.substr(0, close);
      r.parsed.content += body.substr(close + 8);
      body.erase(close, 8);
    }
    r.stripped = content_before + body;
  };
  if (starts_inside) {
    std::string body = text.starts_with("<think>") ? text.substr(7) : text;
    split_block(body, "");
  } else {
    size_t open = text.find("<think>");
    if (open == std::string::npos) {
      r.parsed.content = text;
      r.stripped = text;
    } else {
      split_block(text.substr(open + 7), text.substr(0, open));
    }
  }
  return r;
}

std::string RandomMarkupText(std::mt19937& rng) {
  static const std::vector<std::string> kFragments = {
      "<think>", "</think>", "<", ">", "/", "<th", "</thi", "</", "think", "ink>", "t", "h",
      "a", " ", "\n", "\n\n", "é", "\xEF\xBF\xBD", "日本", "🙂", "<tool_call>", "a < b", "x"};
  std::uniform_int_distribution<size_t> count(0, 24);
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  std::string text;
  for (size_t n = count(rng); n > 0; --n) text += kFragments[pick(rng)];
  return text;
}

TEST(ReasoningParser, PropertyConcatenationIsInputMinusMarkupForAnyChunking) {
  std::mt19937 rng(20240611);
  for (int iteration = 0; iteration < 1500; ++iteration) {
    std::string text = RandomMarkupText(rng);
    bool starts_inside = iteration % 2 == 0;
    Reference want = ReferenceParse(text, starts_inside);
    for (const auto& pieces : AllChunkings(text, 4)) {
      OutputEvents events = RunReasoning(pieces, starts_inside);
      ASSERT_EQ(testing::Accumulate(events), want.parsed) << "input: " << text;
      ASSERT_EQ(testing::Reconstruct(events), want.stripped) << "input: " << text;
      for (const OutputEvent& e : events) ASSERT_FALSE(e.text.empty());
    }
  }
}

TEST(ReasoningParser, OneCharacterAtATimeEmitsAsSoonAsDecided) {
  // Every character that cannot start a tag is released in the same Feed.
  ReasoningParser parser({.starts_in_reasoning = true});
  std::string released, fed;
  for (const std::string& c : OneCharacterPerPiece("ab c é")) {
    OutputEvents out;
    parser.Feed(c, out);
    fed += c;
    for (const auto& e : out) released += e.text;
    EXPECT_EQ(released, fed);
  }
}

}  // namespace
}  // namespace sparkserve::text
