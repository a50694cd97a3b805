// Reporting for `sparkserve bench serve`: vLLM's console summary table and its result JSON keys
// (completed, failed, duration, ..., mean_/median_/std_/p90_/p99_ + ttft_ms/tpot_ms/itl_ms/e2el_ms,
// per-request input_lens/output_lens/ttfts/itls/errors...).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_datasets.h"
#include "bench/serve_metrics.h"
#include "bench/serve_runner.h"
#include "nlohmann/json.hpp"

namespace sparkserve::bench {

struct RunDescription {
  double request_rate = 0;
  double burstiness = 1;
  int max_concurrency = 0;  // 0: unlimited
  bool goodput = false;
  bool interrupted = false;
  std::string output_token_source;  // e.g. "usage" or "usage 3, chunks 2"
};

// "============ Serving Benchmark Result ============" ... "==========" (ends with a newline).
std::string FormatSummary(const ServeMetrics& m, const RunDescription& d);

// The per-run result object (metrics + per-request records).
nlohmann::json RunResultJson(const ServeMetrics& m, const RunDescription& d, const ServeRunResult& r);

// "usage" when every successful request used it, else "usage N, tokenizer N, chunks N".
std::string DescribeTokenSources(const ServeRunResult& r);

}  // namespace sparkserve::bench
