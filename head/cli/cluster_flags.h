// The command-line spelling of tensor parallelism across machines, shared by serve, run, score,
// bench engine and cluster-check: --nodes host:port,..., --token-file, --collective gloo|nccl,
// --tls-ca, --collective-timeout. TP = 1 + the number of nodes (there is no --tp).
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "engine/cluster/cluster_setup.h"

namespace sparkserve::head {

struct ClusterFlags {
  std::string nodes;        // "host:port,host:port"
  std::string token_file;
  std::string collective;   // "" (default by backend), "gloo", "nccl"
  std::string tls_ca_file;
  double collective_timeout_s = 3.0;
};

void AddClusterOptions(CLI::App* cmd, ClusterFlags* flags);

struct ResolvedCluster {
  engine::cluster::ClusterOptions options;  // options.nodes empty: one machine
};

// kAuto as the runner factory resolves it: cuda when this build and machine have a GPU.
model::Backend ResolveAutoBackend(model::Backend backend);

// Splits --nodes, reads the token file and CA file, picks the collective (gloo on the CPU backend,
// nccl on CUDA, unless given). Errors name the flag.
absl::StatusOr<ResolvedCluster> ResolveClusterFlags(const ClusterFlags& flags, model::Backend backend);

}  // namespace sparkserve::head
