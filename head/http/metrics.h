// ServingMetrics: request latencies and outcomes, rendered with the engine's gauges and counters in
// the Prometheus text format under vLLM's metric names with a `sparkserve:` prefix.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "head/engine/engine_api.h"

namespace sparkserve::http {

// A cumulative Prometheus histogram (fixed upper bounds; +Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends `name`_bucket/_count/_sum lines with `labels` (e.g. model_name="m").
  void Render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = over every bound
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

class ServingMetrics {
 public:
  explicit ServingMetrics(std::string model_name);

  void ObserveTimeToFirstToken(double seconds);
  void ObserveTimePerOutputToken(double seconds);  // one inter-token interval
  void ObserveE2eLatency(double seconds);
  void ObserveIterationTokens(int64_t tokens);     // tokens of one engine step
  // One finished request; `finished_reason`: stop | length | abort | error.
  void CountFinished(const std::string& finished_reason);
  void CountHttpResponse(int status);

  // The whole /metrics page.
  std::string Render(const head::EngineStats& stats) const;

 private:
  std::string labels_;  // model_name="..."
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram iteration_tokens_;
  std::map<std::string, uint64_t> finished_;
  std::map<int, uint64_t> http_responses_;
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);

}  // namespace sparkserve::http
