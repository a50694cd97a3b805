// ServingMetrics: histograms and counters, Prometheus text exposition (format 0.0.4).
#include "head/http/metrics.h"

#include <cmath>

#include "fmt/format.h"

namespace sparkserve::head::http {

namespace {
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

void RenderHistogram(std::string& out, const engine::Histogram& h, const std::string& name,
                     const std::string& labels) {
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    std::string le = i < h.bounds.size() ? Num(h.bounds[i]) : "+Inf";
    out += fmt::format("{}_bucket{{le=\"{}\",{}}} {}\n", name, le, labels, h.Cumulative(i));
  }
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, h.count);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, Num(h.sum));
}

ServingMetrics::ServingMetrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", EscapeLabelValue(model_name))) {}

void ServingMetrics::CountHttpResponse(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_responses_[status];
}

std::string ServingMetrics::Render(const engine::EngineStats& st) const {
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
  // As vLLM counts it: pages only the prefix cache holds are free for any request that needs them.
  double kv_usage = st.total_kv_pages > 0
                        ? 1.0 - static_cast<double>(st.free_kv_pages + st.prefix_cache_only_pages) / st.total_kv_pages
                        : 0.0;
  gauge("kv_cache_usage_perc", "KV-cache usage (pages held by running requests). 1 means 100 percent usage.",
        kv_usage);
  gauge("num_free_slots", "Sequence state slots free.", static_cast<double>(st.free_slots));
  gauge("num_total_slots", "Sequence state slots in all.", static_cast<double>(st.total_slots));
  if (in_flight_) {
    gauge("http_requests_in_flight", "HTTP requests whose response has not ended (this one included).",
          static_cast<double>(in_flight_()));
  }
  if (connections_) gauge("http_connections", "Open client connections.", static_cast<double>(connections_()));
  counter("prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
          static_cast<double>(st.prefix_cache_queries));
  counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
          static_cast<double>(st.prefix_cache_hits));
  gauge("prefix_cache_device_entries", "Prefix cache checkpoints held in device state slots.",
        static_cast<double>(st.prefix_cache_entries));
  gauge("prefix_cache_device_slots", "Device state slots set aside for prefix cache checkpoints.",
        static_cast<double>(st.prefix_cache_max_entries));
  gauge("prefix_cache_device_kv_pages", "KV cache pages held by the prefix cache.",
        static_cast<double>(st.prefix_cache_pages));
  counter("prompt_tokens", "Number of prefill tokens processed.",
          static_cast<double>(st.prompt_tokens_total));
  counter("generation_tokens", "Number of generation tokens processed.",
          static_cast<double>(st.generation_tokens_total));
  counter("engine_steps", "Number of engine forward steps run.", static_cast<double>(st.steps_total));

  counter("num_preemptions", "Cumulative number of preemptions.",
          static_cast<double>(st.num_preemptions_total));
  counter("constraint_mask_seconds", "Seconds spent computing structured-output token masks (beside the forward).",
          st.constraint_mask_seconds_total);
  counter("constraint_wait_seconds", "Seconds steps waited for structured-output token masks after the forward.",
          st.constraint_wait_seconds_total);
  // Speculative decoding, as vLLM counts it: verify windows, drafted tokens, accepted drafts, and
  // accepted drafts by position (0-based).
  counter("spec_decode_num_drafts", "Number of spec decoding drafts.", static_cast<double>(st.spec_num_drafts));
  counter("spec_decode_num_draft_tokens", "Number of draft tokens.", static_cast<double>(st.spec_num_draft_tokens));
  counter("spec_decode_num_accepted_tokens", "Number of accepted tokens.",
          static_cast<double>(st.spec_num_accepted_tokens));
  {
    std::string name = "sparkserve:spec_decode_num_accepted_tokens_per_pos";
    Head(out, name, "counter", "Accepted tokens per draft position.");
    for (size_t pos = 0; pos < st.spec_accepted_per_pos.size(); ++pos) {
      out += fmt::format("{}_total{{position=\"{}\",{}}} {}\n", name, pos, labels_, st.spec_accepted_per_pos[pos]);
    }
  }
  {
    std::string name = "sparkserve:request_success";
    Head(out, name, "counter", "Count of successfully processed requests.");
    const std::pair<const char*, int64_t> finished[] = {{"stop", st.requests_finished_stop},
                                                        {"length", st.requests_finished_length},
                                                        {"abort", st.requests_finished_abort},
                                                        {"error", st.requests_finished_error}};
    for (const auto& [reason, n] : finished) {
      out += fmt::format("{}_total{{finished_reason=\"{}\",{}}} {}\n", name, reason, labels_, n);
    }
  }
  auto hist = [&](const char* short_name, const char* help, const engine::Histogram& h) {
    std::string name = fmt::format("sparkserve:{}", short_name);
    Head(out, name, "histogram", help);
    RenderHistogram(out, h, name, labels_);
  };
  hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", st.time_to_first_token_s);
  hist("time_per_output_token_seconds", "Histogram of time per output token in seconds.", st.time_per_output_token_s);
  hist("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", st.e2e_request_latency_s);
  hist("iteration_tokens_total", "Histogram of number of tokens per engine step.", st.iteration_tokens);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string name = "sparkserve:http_responses";
    Head(out, name, "counter", "HTTP responses by status code.");
    for (const auto& [status, n] : http_responses_) {
      out += fmt::format("{}_total{{status=\"{}\",{}}} {}\n", name, status, labels_, n);
    }
  }
  return out;
}

std::string RenderClusterMetrics(const engine::cluster::ClusterStatus& st, const std::string& model_name) {
  const std::string labels = fmt::format("model_name=\"{}\"", EscapeLabelValue(model_name));
  std::string out;
  auto line = [&](const char* short_name, const char* type, const char* help, const char* suffix, double v) {
    const std::string name = fmt::format("sparkserve:{}", short_name);
    Head(out, name, type, help);
    out += fmt::format("{}{}{{{}}} {}\n", name, suffix, labels, Num(v));
  };
  line("shard_bytes_sent", "counter", "Shard tensor bytes the head shipped to its nodes.", "_total",
       static_cast<double>(st.shard_bytes_sent_total));
  line("shard_bytes_reused", "counter", "Shard tensor bytes the nodes already held (their cache or loaded runner).",
       "_total", static_cast<double>(st.shard_bytes_reused_total));
  line("cluster_syncs", "counter", "Completed syncs of the nodes (start-up, then one per recovery).", "_total",
       static_cast<double>(st.syncs_total));
  line("cluster_serving", "gauge", "1 when every node is synced and the tensor-parallel group serves.", "",
       st.serving ? 1.0 : 0.0);
  line("tensor_parallel_ranks", "gauge", "Ranks of the tensor-parallel group (this head + its nodes).", "",
       static_cast<double>(st.world));
  return out;
}

}  // namespace sparkserve::head::http
