// Histogram: observations counted into fixed buckets (Prometheus style), plus their sum and count;
// the engine keeps one per latency metric and the HTTP layer prints them on /metrics.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace sparkserve::engine {

struct Histogram {
  std::vector<double> bounds;   // bucket upper bounds (le), ascending; a +Inf bucket follows
  std::vector<int64_t> counts;  // [bounds.size() + 1]: observations per bucket (NOT cumulative)
  double sum = 0.0;
  int64_t count = 0;

  static Histogram WithBounds(std::vector<double> upper_bounds) {
    Histogram h;
    h.bounds = std::move(upper_bounds);
    h.counts.assign(h.bounds.size() + 1, 0);
    return h;
  }
  void Observe(double value) {
    // Prometheus buckets are `le`: a value equal to a bound belongs to that bound's bucket.
    const auto at = std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
    ++counts[static_cast<size_t>(at)];
    sum += value;
    ++count;
  }
  // Observations <= bounds[i] (i == bounds.size(): all of them), as Prometheus prints them.
  int64_t Cumulative(size_t i) const {
    int64_t c = 0;
    for (size_t b = 0; b <= i && b < counts.size(); ++b) c += counts[b];
    return c;
  }
};

}  // namespace sparkserve::engine
