// The serving benchmark's load generator: sends BenchPrompts to an OpenAI-compatible streaming
// endpoint at a Poisson/gamma request rate (vLLM's --request-rate/--burstiness) and/or under a
// concurrency cap, on one io_context thread, parsing each SSE stream into a RequestOutcome.
// SIGINT stops sending, gives in-flight requests a grace period, then returns what was measured.
#pragma once
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_datasets.h"
#include "bench/http_stream_client.h"
#include "bench/serve_metrics.h"

namespace sparkserve::bench {

struct ServeRunOptions {
  HttpTarget target;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;
  std::string api_key;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0: unlimited
  bool ignore_eos = false;
  std::string extra_body;   // a JSON object merged into every request body ("" for none)
  double request_timeout_s = 600;
  unsigned long seed = 0;
  double interrupt_grace_s = 5;  // after Ctrl-C, wait this long for in-flight requests
  bool progress = true;          // progress bar on stderr
  std::string progress_label;
  bool messages_json = false;  // chat: BenchPrompt::prompt is the messages array as JSON (multiturn)
};

struct ServeRunResult {
  std::vector<RequestOutcome> outcomes;  // one per request sent, in dataset order
  double duration_s = 0;
  bool interrupted = false;
};

// Counts output tokens of generated text when a server omits usage (null: count chunks).
using OutputTokenCounter = std::function<int(const std::string& text)>;

// vLLM's inter-arrival delays, cumulative from the first send (seconds): 0 for an infinite rate,
// 1/rate for infinite burstiness, else gamma(shape=burstiness, scale=1/(rate*burstiness)) draws
// rescaled so the last arrival is at n/rate.
std::vector<double> ArrivalOffsets(int n, double request_rate, double burstiness, unsigned long seed);

// The JSON request body for one prompt (stream, stream_options.include_usage, temperature 0).
std::string BuildRequestBody(const ServeRunOptions& opts, const BenchPrompt& p);

// Folds one SSE data payload into `o` (vLLM's per-chunk TTFT/ITL rules). Returns false at
// "[DONE]". `t` is seconds since the request was sent.
struct StreamState {
  bool first_chunk = false;
  bool done = false;
  double last_chunk_time = 0;
  int chunks = 0;
  int usage_completion_tokens = -1;
};
bool ApplySsePayload(std::string_view data, double t, RequestOutcome& o, StreamState& st);

// Sends every prompt; blocks until all complete (or SIGINT + grace).
ServeRunResult RunServeBenchmark(const std::vector<BenchPrompt>& prompts, const ServeRunOptions& opts,
                                 const OutputTokenCounter& count_output);

}  // namespace sparkserve::bench
