// Pieces of the HTTP layer on their own: metrics text, stop strings across tokens, error JSON.
#include "gtest/gtest.h"
#include "head/http/api_error.h"
#include "head/http/metrics.h"
#include "head/http/sample_text.h"
#include "tests/unit/http/fakes.h"

namespace sparkserve::head::http {
namespace {

std::shared_ptr<const text::StopStringSet> Stops(std::vector<std::string> stops) {
  return *text::StopStringSet::Create(std::move(stops));
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithCountAndSum) {
  engine::Histogram h = engine::Histogram::WithBounds({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(1.0);
  h.Observe(7.0);
  std::string out;
  RenderHistogram(out, h, "m", "model_name=\"x\"");
  EXPECT_EQ(out,
            "m_bucket{le=\"0.1\",model_name=\"x\"} 1\n"
            "m_bucket{le=\"1.0\",model_name=\"x\"} 3\n"
            "m_bucket{le=\"+Inf\",model_name=\"x\"} 4\n"
            "m_count{model_name=\"x\"} 4\n"
            "m_sum{model_name=\"x\"} 8.55\n");
}

TEST(MetricsTest, PageHasVllmNamesUnderTheSparkservePrefix) {
  ServingMetrics m("q\"3");
  m.CountHttpResponse(429);
  engine::EngineStats s;
  s.num_requests_running = 3;
  s.num_requests_waiting = 2;
  s.prompt_tokens_total = 40;
  s.generation_tokens_total = 9;
  s.requests_finished_length = 1;
  s.iteration_tokens = engine::Histogram::WithBounds({1, 8, 16});
  s.iteration_tokens.Observe(12);
  std::string page = m.Render(s);
  for (const char* want :
       {"# TYPE sparkserve:num_requests_running gauge\nsparkserve:num_requests_running{model_name=\"q\\\"3\"} 3.0\n",
        "sparkserve:num_requests_waiting{model_name=\"q\\\"3\"} 2.0\n",
        "# TYPE sparkserve:prompt_tokens counter\nsparkserve:prompt_tokens_total{model_name=\"q\\\"3\"} 40.0\n",
        "sparkserve:generation_tokens_total{model_name=\"q\\\"3\"} 9.0\n",
        "sparkserve:request_success_total{finished_reason=\"length\",model_name=\"q\\\"3\"} 1\n",
        "sparkserve:request_success_total{finished_reason=\"stop\",model_name=\"q\\\"3\"} 0\n",
        "# TYPE sparkserve:iteration_tokens_total histogram\n",
        "sparkserve:iteration_tokens_total_bucket{le=\"16.0\",model_name=\"q\\\"3\"} 1\n",
        "sparkserve:iteration_tokens_total_bucket{le=\"8.0\",model_name=\"q\\\"3\"} 0\n",
        "# TYPE sparkserve:time_to_first_token_seconds histogram\n",
        "# TYPE sparkserve:time_per_output_token_seconds histogram\n",
        "# TYPE sparkserve:e2e_request_latency_seconds histogram\n",
        "sparkserve:http_responses_total{status=\"429\",model_name=\"q\\\"3\"} 1\n",
        "sparkserve:kv_cache_usage_perc{model_name=\"q\\\"3\"} 0.0\n"}) {
    EXPECT_NE(page.find(want), std::string::npos) << want << "\n---\n" << page;
  }
}

std::string Text(const std::vector<OutputPiece>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p.text;
  return s;
}

TEST(SampleTextTest, StopStringSpanningTokensIsWithheldWithWhatFollows) {
  testing::FakeCodec codec;
  SampleText st(codec.NewDecoder(true), nullptr, Stops({"END", "xyz"}), false);
  std::string released;
  for (char c : std::string("abEN")) {
    int32_t id = static_cast<unsigned char>(c);
    released += Text(st.Push(std::span<const int32_t>(&id, 1)).pieces);
  }
  EXPECT_EQ(released, "ab");  // "EN" may begin "END": held
  int32_t d = 'D';
  auto upd = st.Push(std::span<const int32_t>(&d, 1));
  EXPECT_EQ(Text(upd.pieces), "");
  ASSERT_TRUE(upd.stop_string.has_value());
  EXPECT_EQ(*upd.stop_string, "END");
  int32_t more = 'q';
  EXPECT_TRUE(st.Push(std::span<const int32_t>(&more, 1)).pieces.empty());
}

TEST(SampleTextTest, HeldTextIsReleasedAtTheEndAndBrokenUtf8BecomesReplacement) {
  testing::FakeCodec codec;
  SampleText st(codec.NewDecoder(true), nullptr, Stops({"EN!"}), false);
  std::vector<int32_t> ids = {'a', 'E', 'N', 0xE2, 0x9C};  // "aEN" + a cut-off 3-byte character
  std::string released = Text(st.Push(ids).pieces);
  EXPECT_EQ(released, "a");
  released += Text(st.Finish().pieces);
  EXPECT_EQ(released, "aEN\xEF\xBF\xBD");
}

TEST(ApiErrorTest, EachApiHasItsOwnShape) {
  ApiError e{429, "slow down", "", 1};
  EXPECT_EQ(OpenAiErrorJson(e),
            R"({"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}})");
  EXPECT_EQ(AnthropicErrorJson(e), R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})");
  HttpResponse r = ErrorResponse(ApiFlavor::kOpenAi, e);
  EXPECT_EQ(r.status, 429);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].second, "1");
  EXPECT_EQ(ApiErrorFromStatus(absl::ResourceExhaustedError("q")).status, 429);
  EXPECT_EQ(ApiErrorFromStatus(absl::InvalidArgumentError("q")).status, 400);
  EXPECT_EQ(ApiErrorFromStatus(absl::InternalError("q")).status, 500);
  EXPECT_EQ(FlavorOfPath("/v1/messages/count_tokens"), ApiFlavor::kAnthropic);
  EXPECT_EQ(FlavorOfPath("/v1/chat/completions"), ApiFlavor::kOpenAi);
}

}  // namespace
}  // namespace sparkserve::head::http
