// cluster-check: handshake every node, join one group of all ranks (this head + the nodes), time
// all-reduces of a few sizes and judge the figures in plain words (the collective fell back to TCP
// sockets, a slow interface, loopback...).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cluster/cluster_runner.h"
#include "proto/node.pb.h"

namespace sparkserve::engine::cluster {

struct AllReduceTiming {
  uint64_t bytes = 0;
  int32_t iterations = 0;  // timed (after the warm-up)
  double median_us = 0, min_us = 0;
  double algbw_gbs = 0;  // bytes / median time
  double busbw_gbs = 0;  // algbw * 2 (n - 1) / n: the bytes each link carries, as nccl-tests reports
};

struct ClusterCheckResult {
  std::vector<std::string> targets;                // as given
  std::vector<proto::AuthenticateResponse> nodes;  // what each node said about itself
  int32_t world = 1;
  std::string transport;
  std::vector<AllReduceTiming> timings;
};

// Each size runs `warmup` untimed then `iterations` timed all-reduces of floats on every rank; the
// sums are checked. Errors name the node.
absl::StatusOr<ClusterCheckResult> RunClusterCheck(const ClusterOptions& options, const std::vector<uint64_t>& sizes,
                                                   int32_t warmup, int32_t iterations);

// Plain-language readings of the figures, e.g. that the collective runs over TCP sockets, or that
// the bandwidth is far below the link's (with the usual causes to check).
std::vector<std::string> JudgeClusterCheck(const ClusterCheckResult& result);

}  // namespace sparkserve::engine::cluster
