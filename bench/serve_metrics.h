// Serving-benchmark metrics exactly as `vllm bench serve` defines them (vllm/benchmarks/serve.py,
// calculate_metrics): per-request outcomes in, completed/failed, throughputs, peak output rate and
// concurrency, TTFT/TPOT/ITL/E2EL statistics and goodput out. Percentiles interpolate linearly
// between order statistics, as numpy.percentile does by default.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::bench {

// One request as measured by the client. Times are seconds; start_time is on the run's clock.
struct RequestOutcome {
  bool success = false;
  std::string error;         // why it failed (empty when success)
  double start_time = 0.0;   // when the request was sent
  double ttft = 0.0;         // first streamed chunk - start_time
  double latency = 0.0;      // last streamed chunk - start_time (E2EL)
  std::vector<double> itl;   // gaps between consecutive chunks after the first
  int prompt_len = 0;        // input tokens (from the dataset)
  int output_tokens = 0;     // output tokens (usage, local tokenizer or chunk count)
  std::string output_token_source;  // "usage" | "tokenizer" | "chunks"
  std::string generated_text;
};

// numpy.percentile(values, p) with the default linear method; 0 for an empty input (as vLLM's
// `np.percentile(x or 0, p)`).
double Percentile(std::span<const double> values, double p);

// mean / median / std (population) / p90 / p99, in milliseconds.
struct LatencyStats {
  double mean_ms = 0, median_ms = 0, std_ms = 0, p90_ms = 0, p99_ms = 0;
};
LatencyStats SummarizeSeconds(std::span<const double> seconds);

// --goodput ttft:MS tpot:MS e2el:MS. A request is good when every given SLO holds (<=).
struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& items);

struct ServeMetrics {
  int completed = 0;
  int failed = 0;
  long total_input = 0;
  long total_output = 0;
  double duration_s = 0;
  double request_throughput = 0;
  double request_goodput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<int> actual_output_lens;  // per request, 0 for failed ones
};

// `duration_s` is the benchmark's wall time (first send to last completion).
ServeMetrics ComputeMetrics(std::span<const RequestOutcome> outcomes, double duration_s, const GoodputSlo& slo);

}  // namespace sparkserve::bench
