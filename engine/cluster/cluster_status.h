// ClusterStatus: what the tensor-parallel cluster is doing, for /health and /metrics. Its own
// header so that the HTTP layer (and its fuzz build) need not see gRPC or the node protocol.
#pragma once
#include <cstdint>
#include <string>

namespace sparkserve::engine::cluster {

// What the cluster is doing, for /health and /metrics.
struct ClusterStatus {
  bool serving = false;
  std::string detail;          // why it is not serving (or the transport when it is)
  int32_t world = 1;
  std::string transport;
  uint64_t shard_bytes_sent_total = 0;    // tensor bytes shipped to nodes
  uint64_t shard_bytes_reused_total = 0;  // tensor bytes the nodes already had
  int64_t syncs_total = 0;                // completed syncs (start-up, then one per recovery)
  // Per-step costs on the head (steps that ran on every rank): encoding the plan and writing it to
  // every node's stream, and the lockstep check (digest + one small all-reduce).
  int64_t steps_total = 0;
  double control_seconds_total = 0;
  double lockstep_seconds_total = 0;
};

}  // namespace sparkserve::engine::cluster
