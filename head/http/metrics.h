// ServingMetrics: the /metrics page: the engine's gauges, counters and latency histograms
// (EngineStats) plus HTTP response counts, in the Prometheus text format under vLLM's metric names
// with a `sparkserve:` prefix.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/cluster/cluster_status.h"
#include "engine/engine_api.h"

namespace sparkserve::head::http {

// Appends `name`_bucket/_count/_sum lines of `h` with `labels` (e.g. model_name="m").
void RenderHistogram(std::string& out, const engine::Histogram& h, const std::string& name,
                     const std::string& labels);

class ServingMetrics {
 public:
  explicit ServingMetrics(std::string model_name);

  void CountHttpResponse(int status);
  // The HTTP server's gauges (requests in flight, open connections); set before serving.
  void SetTransportGauges(std::function<int64_t()> in_flight, std::function<int64_t()> connections) {
    in_flight_ = std::move(in_flight);
    connections_ = std::move(connections);
  }

  // The whole /metrics page.
  std::string Render(const engine::EngineStats& stats) const;

 private:
  std::string labels_;  // model_name="..."
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_responses_;
  std::function<int64_t()> in_flight_, connections_;
};

// The tensor-parallel cluster's lines: shard bytes sent to / reused by the nodes (counters), whether
// the group serves and how many ranks it has (gauges), completed syncs.
std::string RenderClusterMetrics(const engine::cluster::ClusterStatus& status, const std::string& model_name);

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);

}  // namespace sparkserve::head::http
