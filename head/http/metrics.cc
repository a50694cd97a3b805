// ServingMetrics: histograms and counters, Prometheus text exposition (format 0.0.4).
#include "head/http/metrics.h"

#include <cmath>

#include "fmt/format.h"

namespace sparkserve::http {

namespace {
// Bucket bounds as in vLLM's metrics.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTpotBounds = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,
                                         0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,
                                         7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kE2eBounds = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,
                                        5.0,  10.0, 15.0, 20.0, 30.0,  40.0,  50.0,
                                        60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationBounds = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

void Head(std::string& out, const std::string& name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}
}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::Render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    out += fmt::format("{}_bucket{{le=\"{}\",{}}} {}\n", name, le, labels, cumulative);
  }
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, Num(sum_));
}

ServingMetrics::ServingMetrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", EscapeLabelValue(model_name))),
      ttft_(kTtftBounds),
      tpot_(kTpotBounds),
      e2e_(kE2eBounds),
      iteration_tokens_(kIterationBounds) {
  for (const char* r : {"stop", "length", "abort", "error"}) finished_[r] = 0;
}

void ServingMetrics::ObserveTimeToFirstToken(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.Observe(s);
}
void ServingMetrics::ObserveTimePerOutputToken(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  tpot_.Observe(s);
}
void ServingMetrics::ObserveE2eLatency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.Observe(s);
}
void ServingMetrics::ObserveIterationTokens(int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  iteration_tokens_.Observe(static_cast<double>(tokens));
}
void ServingMetrics::CountFinished(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[reason];
}
void ServingMetrics::CountHttpResponse(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_responses_[status];
}

std::string ServingMetrics::Render(const head::EngineStats& st) const {
  std::string out;
  auto gauge = [&](const char* short_name, const char* help, double v) {
    std::string name = fmt::format("sparkserve:{}", short_name);
    Head(out, name, "gauge", help);
    out += fmt::format("{}{{{}}} {}\n", name, labels_, Num(v));
  };
  auto counter = [&](const char* short_name, const char* help, double v) {
    std::string name = fmt::format("sparkserve:{}", short_name);
    Head(out, name, "counter", help);
    out += fmt::format("{}_total{{{}}} {}\n", name, labels_, Num(v));
  };
  gauge("num_requests_running", "Number of requests in model execution batches.",
        static_cast<double>(st.num_requests_running));
  gauge("num_requests_waiting", "Number of requests waiting to be processed.",
        static_cast<double>(st.num_requests_waiting));
  double kv_usage = st.total_kv_pages > 0
                        ? 1.0 - static_cast<double>(st.free_kv_pages) / st.total_kv_pages
                        : 0.0;
  gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage);
  gauge("num_free_slots", "Sequence state slots free.", static_cast<double>(st.free_slots));
  gauge("num_total_slots", "Sequence state slots in all.", static_cast<double>(st.total_slots));
  counter("prompt_tokens", "Number of prefill tokens processed.",
          static_cast<double>(st.prompt_tokens_total));
  counter("generation_tokens", "Number of generation tokens processed.",
          static_cast<double>(st.generation_tokens_total));
  counter("engine_steps", "Number of engine forward steps run.", static_cast<double>(st.steps_total));

  std::lock_guard<std::mutex> lock(mu_);
  {
    std::string name = "sparkserve:request_success";
    Head(out, name, "counter", "Count of finished requests by finish reason.");
    for (const auto& [reason, n] : finished_) {
      out += fmt::format("{}_total{{finished_reason=\"{}\",{}}} {}\n", name,
                         EscapeLabelValue(reason), labels_, n);
    }
  }
  {
    std::string name = "sparkserve:http_responses";
    Head(out, name, "counter", "HTTP responses by status code.");
    for (const auto& [status, n] : http_responses_) {
      out += fmt::format("{}_total{{status=\"{}\",{}}} {}\n", name, status, labels_, n);
    }
  }
  auto hist = [&](const char* short_name, const char* help, const Histogram& h) {
    std::string name = fmt::format("sparkserve:{}", short_name);
    Head(out, name, "histogram", help);
    h.Render(out, name, labels_);
  };
  hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
  hist("time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpot_);
  hist("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", e2e_);
  hist("iteration_tokens_total", "Histogram of number of tokens per engine step.", iteration_tokens_);
  return out;
}

}  // namespace sparkserve::http
