// Metrics of bench/serve_metrics against hand-computed synthetic timelines (no network), and the
// arrival schedule of bench/serve_runner.
#include "bench/serve_metrics.h"

#include <cmath>
#include <limits>

#include "bench/serve_runner.h"
#include "gtest/gtest.h"

namespace sparkserve::bench {
namespace {

constexpr double kTol = 1e-6;

TEST(PercentileTest, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_NEAR(Percentile(v, 50), 2.5, kTol);
  EXPECT_NEAR(Percentile(v, 90), 3.7, kTol);   // rank 0.9*3 = 2.7 -> 3 + 0.7
  EXPECT_NEAR(Percentile(v, 99), 3.97, kTol);
  EXPECT_NEAR(Percentile(v, 0), 1, kTol);
  EXPECT_NEAR(Percentile(v, 100), 4, kTol);
  EXPECT_NEAR(Percentile(std::vector<double>{5}, 99), 5, kTol);
  EXPECT_EQ(Percentile(std::vector<double>{}, 50), 0);
}

RequestOutcome Ok(double start, double ttft, std::vector<double> itl, int prompt, int out) {
  RequestOutcome o;
  o.success = true;
  o.start_time = start;
  o.ttft = ttft;
  o.itl = std::move(itl);
  o.latency = ttft;
  for (double g : o.itl) o.latency += g;
  o.prompt_len = prompt;
  o.output_tokens = out;
  return o;
}

// A: sent 0.0, chunks at 0.1 0.15 0.2 0.3, 4 tokens. B: sent 0.5, chunks at +0.2 +0.3, 2 tokens.
// C: failed. D: sent 1.2, one chunk at +0.4, 1 token. Duration 2 s.
std::vector<RequestOutcome> Timeline() {
  RequestOutcome failed;
  failed.error = "HTTP 500: boom";
  failed.start_time = 0.2;
  failed.prompt_len = 99;
  return {Ok(0.0, 0.1, {0.05, 0.05, 0.1}, 10, 4), Ok(0.5, 0.2, {0.1}, 20, 2), failed, Ok(1.2, 0.4, {}, 5, 1)};
}

TEST(ComputeMetricsTest, CountsAndThroughputs) {
  const auto outcomes = Timeline();
  const ServeMetrics m = ComputeMetrics(outcomes, 2.0, {});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 35);  // failed request's prompt not counted
  EXPECT_EQ(m.total_output, 7);
  EXPECT_NEAR(m.request_throughput, 1.5, kTol);
  EXPECT_NEAR(m.output_throughput, 3.5, kTol);
  EXPECT_NEAR(m.total_token_throughput, 21.0, kTol);
  EXPECT_EQ(m.actual_output_lens, (std::vector<int>{4, 2, 0, 1}));
}

TEST(ComputeMetricsTest, LatencyStatistics) {
  const auto outcomes = Timeline();
  const ServeMetrics m = ComputeMetrics(outcomes, 2.0, {});
  // TTFT {0.1, 0.2, 0.4}
  EXPECT_NEAR(m.ttft.mean_ms, 700.0 / 3, 1e-6);
  EXPECT_NEAR(m.ttft.median_ms, 200, 1e-6);
  EXPECT_NEAR(m.ttft.std_ms, 1000 * std::sqrt(0.14 / 9), 1e-6);  // population std
  EXPECT_NEAR(m.ttft.p90_ms, 360, 1e-6);
  EXPECT_NEAR(m.ttft.p99_ms, 396, 1e-6);
  // TPOT: A (0.3-0.1)/3, B (0.3-0.2)/1; D has one token and is left out.
  EXPECT_NEAR(m.tpot.mean_ms, (200.0 / 3 + 100) / 2, 1e-6);
  EXPECT_NEAR(m.tpot.median_ms, (200.0 / 3 + 100) / 2, 1e-6);
  EXPECT_NEAR(m.tpot.p99_ms, 200.0 / 3 + 0.99 * (100 - 200.0 / 3), 1e-6);
  // ITL pooled {0.05, 0.05, 0.1, 0.1}
  EXPECT_NEAR(m.itl.mean_ms, 75, 1e-6);
  EXPECT_NEAR(m.itl.median_ms, 75, 1e-6);
  EXPECT_NEAR(m.itl.p90_ms, 100, 1e-6);
  EXPECT_NEAR(m.itl.std_ms, 25, 1e-6);
  // E2EL {0.3, 0.3, 0.4}
  EXPECT_NEAR(m.e2el.mean_ms, 1000.0 / 3, 1e-6);
  EXPECT_NEAR(m.e2el.median_ms, 300, 1e-6);
}

TEST(ComputeMetricsTest, PeakOutputAndConcurrencyInOneSecondBuckets) {
  const auto outcomes = Timeline();
  const ServeMetrics m = ComputeMetrics(outcomes, 2.0, {});
  // Tokens at 0.1 0.15 0.2 0.3 (A), 0.7 0.8 (B) in second 0; 1.6 (D) in second 1.
  EXPECT_NEAR(m.max_output_tokens_per_s, 6, kTol);
  // A [0,0.3] and B [0.5,0.8] both touch second 0.
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(ComputeMetricsTest, Goodput) {
  const auto outcomes = Timeline();
  GoodputSlo ttft_only;
  ttft_only.ttft_ms = 250;  // A, B good; D (400 ms) not
  EXPECT_NEAR(ComputeMetrics(outcomes, 2.0, ttft_only).request_goodput, 1.0, kTol);
  auto both = ParseGoodput({"ttft:250", "tpot:90"});  // B's TPOT is 100 ms
  ASSERT_TRUE(both.ok());
  EXPECT_NEAR(ComputeMetrics(outcomes, 2.0, *both).request_goodput, 0.5, kTol);
  auto e2el = ParseGoodput({"e2el:350"});  // D's 400 ms fails
  ASSERT_TRUE(e2el.ok());
  EXPECT_NEAR(ComputeMetrics(outcomes, 2.0, *e2el).request_goodput, 1.0, kTol);
}

TEST(ComputeMetricsTest, AllFailedGivesZeros) {
  RequestOutcome f;
  f.error = "connect: refused";
  const ServeMetrics m = ComputeMetrics(std::vector<RequestOutcome>{f, f}, 1.0, {});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.max_output_tokens_per_s, 0);
}

TEST(ParseGoodputTest, RejectsBadInput) {
  EXPECT_FALSE(ParseGoodput({"ttft"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:abc"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:10ms"}).ok());
  EXPECT_FALSE(ParseGoodput({"latency:10"}).ok());
  EXPECT_FALSE(ParseGoodput({"tpot:-1"}).ok());
  auto s = ParseGoodput({"ttft:10"});
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(*s->ttft_ms, 10);
  EXPECT_FALSE(s->tpot_ms.has_value());
  const std::string msg(ParseGoodput({"latency:10"}).status().message());
  EXPECT_NE(msg.find("unknown metric 'latency'"), std::string::npos) << msg;
}

TEST(ArrivalOffsetsTest, InfiniteRateSendsAllAtOnce) {
  EXPECT_EQ(ArrivalOffsets(3, std::numeric_limits<double>::infinity(), 1.0, 0), (std::vector<double>{0, 0, 0}));
}

TEST(ArrivalOffsetsTest, InfiniteBurstinessIsEvenlySpaced) {
  const auto t = ArrivalOffsets(4, 2.0, std::numeric_limits<double>::infinity(), 0);
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(t[i], 0.5 * static_cast<double>(i + 1), kTol);
}

TEST(ArrivalOffsetsTest, GammaArrivalsAreSeededMonotonicAndEndAtNOverRate) {
  const auto a = ArrivalOffsets(50, 10.0, 0.5, 7);
  const auto b = ArrivalOffsets(50, 10.0, 0.5, 7);
  const auto c = ArrivalOffsets(50, 10.0, 0.5, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NEAR(a.back(), 5.0, 1e-9);  // vLLM rescales to n / rate
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
}

}  // namespace
}  // namespace sparkserve::bench
