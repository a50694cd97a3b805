// SSE framing (bench/sse_parser) and OpenAI stream chunk accounting (ApplySsePayload).
#include "bench/sse_parser.h"

#include <string>
#include <vector>

#include "bench/serve_runner.h"
#include "gtest/gtest.h"

namespace sparkserve::bench {
namespace {

std::vector<std::string> FeedAll(const std::vector<std::string>& pieces, bool finish = true) {
  std::vector<std::string> events;
  SseParser p([&](std::string_view d) { events.emplace_back(d); });
  for (const auto& s : pieces) p.Feed(s);
  if (finish) p.Finish();
  return events;
}

TEST(SseParserTest, EventsSplitAcrossPieces) {
  const auto e = FeedAll({"da", "ta: {\"a\":1}\n", "\ndata: {\"b\"", ":2}\n\ndata: [DONE]\n\n"});
  EXPECT_EQ(e, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"}));
}

TEST(SseParserTest, CrLfCommentsOtherFieldsAndMultilineData) {
  const auto e = FeedAll({": keep-alive\r\n\r\nevent: x\r\nid: 3\r\ndata: one\r\ndata:two\r\n\r\n"});
  EXPECT_EQ(e, (std::vector<std::string>{"one\ntwo"}));
}

TEST(SseParserTest, FinishFlushesUnterminatedEventOnlyOnce) {
  EXPECT_EQ(FeedAll({"data: tail"}), (std::vector<std::string>{"tail"}));
  EXPECT_TRUE(FeedAll({"data: tail"}, /*finish=*/false).empty());
  EXPECT_TRUE(FeedAll({"\n\n\n"}).empty());
}

TEST(ApplySsePayloadTest, CompletionsTimelineAndUsage) {
  RequestOutcome o;
  StreamState st;
  EXPECT_TRUE(ApplySsePayload(R"({"choices":[{"text":"Hel"}]})", 0.10, o, st));
  EXPECT_TRUE(ApplySsePayload(R"({"choices":[{"text":"lo"}]})", 0.15, o, st));
  EXPECT_TRUE(ApplySsePayload(R"({"choices":[{"text":"!"}]})", 0.30, o, st));
  EXPECT_TRUE(ApplySsePayload(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}})", 0.31, o, st));
  EXPECT_FALSE(ApplySsePayload("[DONE]", 0.32, o, st));
  EXPECT_TRUE(st.done);
  EXPECT_DOUBLE_EQ(o.ttft, 0.10);
  ASSERT_EQ(o.itl.size(), 2u);
  EXPECT_NEAR(o.itl[0], 0.05, 1e-12);
  EXPECT_NEAR(o.itl[1], 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(st.last_chunk_time, 0.30);  // the usage-only chunk is not a token chunk
  EXPECT_EQ(st.usage_completion_tokens, 3);
  EXPECT_EQ(st.chunks, 3);
  EXPECT_EQ(o.generated_text, "Hello!");
  EXPECT_TRUE(o.error.empty());
}

TEST(ApplySsePayloadTest, ChatDeltasIncludingReasoning) {
  RequestOutcome o;
  StreamState st;
  ApplySsePayload(R"({"choices":[{"delta":{"role":"assistant","reasoning_content":"hm"}}]})", 0.2, o, st);
  ApplySsePayload(R"({"choices":[{"delta":{"content":"Hi"}}]})", 0.25, o, st);
  EXPECT_EQ(o.generated_text, "hmHi");
  EXPECT_DOUBLE_EQ(o.ttft, 0.2);
  EXPECT_EQ(o.itl.size(), 1u);
}

TEST(ApplySsePayloadTest, ErrorPayloadAndGarbageAreRecorded) {
  RequestOutcome o;
  StreamState st;
  ApplySsePayload(R"({"error":{"message":"out of memory","type":"server_error"}})", 0.1, o, st);
  EXPECT_EQ(o.error, "error in stream: out of memory");
  RequestOutcome g;
  ApplySsePayload("not json", 0.1, g, st);
  EXPECT_NE(g.error.find("unparsable stream chunk: not json"), std::string::npos) << g.error;
}

}  // namespace
}  // namespace sparkserve::bench
