// Console table and result JSON for the serving benchmark (see serve_report.h); the layout
// follows vLLM's benchmark_serving output so runs can be compared side by side.
#include "bench/serve_report.h"

#include <cmath>
#include <map>

#include "fmt/format.h"

namespace sparkserve::bench {
namespace {

std::string Row(const std::string& label, const std::string& value) { return fmt::format("{:<40} {:<10}\n", label, value); }
std::string Num(double v) { return fmt::format("{:.2f}", v); }
std::string Header(const std::string& title, char fill) {
  const size_t width = 50;
  const std::string t = title;
  if (t.size() >= width) return t + "\n";
  const size_t left = (width - t.size()) / 2;
  return std::string(left, fill) + t + std::string(width - t.size() - left, fill) + "\n";
}

void StatsRows(std::string& out, const char* title, const char* abbrev, const LatencyStats& s) {
  out += Header(title, '-');
  out += Row(fmt::format("Mean {} (ms):", abbrev), Num(s.mean_ms));
  out += Row(fmt::format("Median {} (ms):", abbrev), Num(s.median_ms));
  out += Row(fmt::format("P90 {} (ms):", abbrev), Num(s.p90_ms));
  out += Row(fmt::format("P99 {} (ms):", abbrev), Num(s.p99_ms));
}

void StatsJson(nlohmann::json& j, const std::string& name, const LatencyStats& s) {
  j["mean_" + name + "_ms"] = s.mean_ms;
  j["median_" + name + "_ms"] = s.median_ms;
  j["std_" + name + "_ms"] = s.std_ms;
  j["p90_" + name + "_ms"] = s.p90_ms;
  j["p99_" + name + "_ms"] = s.p99_ms;
}

}  // namespace

std::string FormatSummary(const ServeMetrics& m, const RunDescription& d) {
  std::string out = Header(" Serving Benchmark Result ", '=');
  if (d.interrupted) out += Row("Interrupted (partial results):", "yes");
  out += Row("Successful requests:", std::to_string(m.completed));
  out += Row("Failed requests:", std::to_string(m.failed));
  if (d.max_concurrency > 0) out += Row("Maximum request concurrency:", std::to_string(d.max_concurrency));
  out += Row("Request rate configured (RPS):", std::isinf(d.request_rate) ? "inf" : Num(d.request_rate));
  out += Row("Benchmark duration (s):", Num(m.duration_s));
  out += Row("Total input tokens:", std::to_string(m.total_input));
  out += Row("Total generated tokens:", std::to_string(m.total_output));
  out += Row("Output tokens counted from:", d.output_token_source);
  out += Row("Request throughput (req/s):", Num(m.request_throughput));
  if (d.goodput) out += Row("Request goodput (req/s):", Num(m.request_goodput));
  out += Row("Output token throughput (tok/s):", Num(m.output_throughput));
  out += Row("Peak output token throughput (tok/s):", Num(m.max_output_tokens_per_s));
  out += Row("Peak concurrent requests:", Num(m.max_concurrent_requests));
  out += Row("Total Token throughput (tok/s):", Num(m.total_token_throughput));
  StatsRows(out, "Time to First Token", "TTFT", m.ttft);
  StatsRows(out, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
  StatsRows(out, "Inter-token Latency", "ITL", m.itl);
  StatsRows(out, "End-to-end Latency", "E2EL", m.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

std::string DescribeTokenSources(const ServeRunResult& r) {
  std::map<std::string, int> n;
  for (const RequestOutcome& o : r.outcomes) {
    if (o.success) ++n[o.output_token_source];
  }
  if (n.empty()) return "none (no successful request)";
  if (n.size() == 1) return n.begin()->first;
  std::string s;
  for (const auto& [k, v] : n) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, v);
  return s;
}

nlohmann::json RunResultJson(const ServeMetrics& m, const RunDescription& d, const ServeRunResult& r) {
  nlohmann::json j;
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["interrupted"] = d.interrupted;
  j["request_rate"] = std::isinf(d.request_rate) ? nlohmann::json("inf") : nlohmann::json(d.request_rate);
  j["burstiness"] = d.burstiness;
  j["max_concurrency"] = d.max_concurrency > 0 ? nlohmann::json(d.max_concurrency) : nlohmann::json(nullptr);
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["output_token_source"] = d.output_token_source;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = d.goodput ? nlohmann::json(m.request_goodput) : nlohmann::json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  StatsJson(j, "ttft", m.ttft);
  StatsJson(j, "tpot", m.tpot);
  StatsJson(j, "itl", m.itl);
  StatsJson(j, "e2el", m.e2el);
  auto& input_lens = j["input_lens"] = nlohmann::json::array();
  j["output_lens"] = m.actual_output_lens;
  auto& ttfts = j["ttfts"] = nlohmann::json::array();
  auto& itls = j["itls"] = nlohmann::json::array();
  auto& e2els = j["e2els"] = nlohmann::json::array();
  auto& starts = j["start_times"] = nlohmann::json::array();
  auto& texts = j["generated_texts"] = nlohmann::json::array();
  auto& errors = j["errors"] = nlohmann::json::array();
  for (const RequestOutcome& o : r.outcomes) {
    input_lens.push_back(o.prompt_len);
    ttfts.push_back(o.success ? o.ttft : 0.0);
    itls.push_back(o.success ? o.itl : std::vector<double>{});
    e2els.push_back(o.success ? o.latency : 0.0);
    starts.push_back(o.start_time);
    texts.push_back(o.generated_text);
    errors.push_back(o.error);
  }
  return j;
}

}  // namespace sparkserve::bench
