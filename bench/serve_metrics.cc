// Metric computations for `sparkserve bench serve` (see serve_metrics.h); mirrors vLLM's
// calculate_metrics line by line so numbers compare across tools.
#include "bench/serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fmt/format.h"

namespace sparkserve::bench {

double Percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0.0;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

LatencyStats SummarizeSeconds(std::span<const double> seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  const double n = static_cast<double>(seconds.size());
  const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
  double var = 0;
  for (double x : seconds) var += (x - mean) * (x - mean);
  s.mean_ms = mean * 1000;
  s.std_ms = std::sqrt(var / n) * 1000;  // np.std: population
  s.median_ms = Percentile(seconds, 50) * 1000;
  s.p90_ms = Percentile(seconds, 90) * 1000;
  s.p99_ms = Percentile(seconds, 99) * 1000;
  return s;
}

absl::StatusOr<GoodputSlo> ParseGoodput(const std::vector<std::string>& items) {
  GoodputSlo slo;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("--goodput '{}': expected NAME:MS (ttft, tpot or e2el)", item));
    }
    const std::string name = item.substr(0, colon);
    double ms = 0;
    try {
      size_t used = 0;
      ms = std::stod(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (...) {
      return absl::InvalidArgumentError(fmt::format("--goodput '{}': '{}' is not a number of milliseconds", item,
                                                    item.substr(colon + 1)));
    }
    if (ms < 0) return absl::InvalidArgumentError(fmt::format("--goodput '{}': SLO must be >= 0", item));
    if (name == "ttft") {
      slo.ttft_ms = ms;
    } else if (name == "tpot") {
      slo.tpot_ms = ms;
    } else if (name == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("--goodput '{}': unknown metric '{}' (ttft, tpot or e2el)", item, name));
    }
  }
  return slo;
}

ServeMetrics ComputeMetrics(std::span<const RequestOutcome> outcomes, double duration_s, const GoodputSlo& slo) {
  ServeMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  int good = 0;
  for (const RequestOutcome& o : outcomes) {
    if (!o.success) {
      ++m.failed;
      m.actual_output_lens.push_back(0);
      continue;
    }
    const int output_len = o.output_tokens;
    m.actual_output_lens.push_back(output_len);
    m.total_input += o.prompt_len;
    m.total_output += output_len;
    double tpot = 0;  // output_len <= 1: TPOT 0 for goodput, excluded from the statistics
    if (output_len > 1) {
      tpot = (o.latency - o.ttft) / (output_len - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
    ++m.completed;
    if (!slo.empty()) {
      bool ok = true;
      if (slo.ttft_ms && o.ttft > *slo.ttft_ms / 1000.0) ok = false;
      if (slo.tpot_ms && tpot > *slo.tpot_ms / 1000.0) ok = false;
      if (slo.e2el_ms && o.latency > *slo.e2el_ms / 1000.0) ok = false;
      if (ok) ++good;
    }
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.request_goodput = good / duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / duration_s;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  }
  m.ttft = SummarizeSeconds(ttfts);
  m.tpot = SummarizeSeconds(tpots);
  m.itl = SummarizeSeconds(itls);
  m.e2el = SummarizeSeconds(e2els);

  // Peak output tokens/s and concurrency over one-second buckets from the first successful send.
  if (m.completed > 0) {
    double min_start = 1e300, max_end = -1e300;
    for (const RequestOutcome& o : outcomes) {
      if (!o.success) continue;
      min_start = std::min(min_start, o.start_time);
      max_end = std::max(max_end, o.start_time + o.latency);
    }
    const auto buckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
    std::vector<double> tokens(buckets, 0), concurrent(buckets, 0);
    for (const RequestOutcome& o : outcomes) {
      if (!o.success) continue;
      double t = o.start_time + o.ttft;
      auto add_token = [&](double when) {
        const double rel = when - min_start;
        if (rel < 0) return;
        const auto b = static_cast<size_t>(rel);  // int() truncation
        if (b < buckets) tokens[b] += 1;
      };
      add_token(t);
      for (double gap : o.itl) {
        t += gap;
        add_token(t);
      }
      const auto first = static_cast<size_t>(o.start_time - min_start);
      const auto last = static_cast<size_t>(o.start_time + o.latency - min_start);
      for (size_t s = first; s <= last && s < buckets; ++s) concurrent[s] += 1;
    }
    m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
    m.max_concurrent_requests = static_cast<int>(*std::max_element(concurrent.begin(), concurrent.end()));
  }
  return m;
}

}  // namespace sparkserve::bench
