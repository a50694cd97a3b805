// LoadRunner: the model runner of `serve`, `run`, `score` and `bench engine`: the plain one on one
// machine, or, with nodes, a ClusterRunner of rank 0 here plus the nodes (TP = 1 + nodes).
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "engine/cluster/cluster_runner.h"
#include "model/runner_factory.h"

namespace sparkserve::engine::cluster {

// Refuses what cannot work (nccl with the CPU backend) and what the model cannot split (TP must
// divide the heads: the error names the config field and both counts). The head's rank runs on
// options.device (its NCCL device too). With nodes, `*cluster` points at the ClusterRunner inside
// the result (it is syncing in the background: see ClusterRunner::WaitUntilServing); else it is
// null.
absl::StatusOr<model::LoadedRunner> LoadRunner(const std::string& model_dir, const model::RunnerOptions& options,
                                               const ClusterOptions& cluster_options, ClusterRunner** cluster);

}  // namespace sparkserve::engine::cluster
