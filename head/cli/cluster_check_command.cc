// `sparkserve cluster-check --nodes host:port,... [--token-file F] [--collective gloo|nccl]`: handshake
// every node, join one group of every rank (this machine + the nodes; nccl by default where this
// machine has a GPU), time all-reduces of 8 KB and 16 MB, print latency and bus bandwidth, and say
// plainly what the figures mean (TCP sockets, a slow path, loopback).
#include <cstdio>

#include "engine/cluster/cluster_check.h"
#include "head/cli/cluster_flags.h"
#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

struct CheckArgs {
  ClusterFlags cluster;
  int device = 0;
  int iterations = 20;
  int warmup = 5;
};

std::string Bytes(uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{} MB", b >> 20);
  return fmt::format("{} KB", b >> 10);
}

int RunClusterCheck(const CheckArgs& a) {
  if (a.cluster.nodes.empty()) {
    spdlog::error("cluster-check: give --nodes host:port,...");
    return 2;
  }
  // The collective a CUDA `serve` here would use (nccl with a GPU, else gloo), unless given.
  absl::StatusOr<ResolvedCluster> resolved = ResolveClusterFlags(a.cluster, ResolveAutoBackend(model::Backend::kAuto));
  if (!resolved.ok()) {
    spdlog::error("cluster-check: {}", std::string(resolved.status().message()));
    return 2;
  }
  resolved->options.device = a.device;
  absl::StatusOr<engine::cluster::ClusterCheckResult> r =
      engine::cluster::RunClusterCheck(resolved->options, {8 << 10, 16 << 20}, a.warmup, a.iterations);
  if (!r.ok()) {
    spdlog::error("cluster-check: {}", std::string(r.status().message()));
    return 1;
  }
  std::printf("ranks: %d (this head + %zu node(s))\n", r->world, r->nodes.size());
  for (size_t i = 0; i < r->nodes.size(); ++i) {
    const proto::AuthenticateResponse& n = r->nodes[i];
    std::string devices;
    for (const proto::DeviceInfo& d : n.devices()) {
      devices += fmt::format("{}{}{}", devices.empty() ? "" : ", ", d.kind() == "cpu" ? "cpu" : d.name(),
                             d.kind() == "cuda" ? fmt::format(" (cuda:{})", d.index()) : "");
    }
    std::printf("  rank %zu: %s (%s), build %s, devices: %s\n", i + 1, r->targets[i].c_str(), n.node_name().c_str(),
                n.build_id().c_str(), devices.c_str());
  }
  std::printf("collective: %s\n", r->transport.c_str());
  std::printf("%-8s %12s %12s %14s %14s\n", "size", "median_us", "min_us", "algbw_GB/s", "busbw_GB/s");
  for (const auto& t : r->timings) {
    std::printf("%-8s %12.1f %12.1f %14.3f %14.3f\n", Bytes(t.bytes).c_str(), t.median_us, t.min_us, t.algbw_gbs,
                t.busbw_gbs);
  }
  for (const std::string& note : engine::cluster::JudgeClusterCheck(*r)) std::printf("note: %s\n", note.c_str());
  return 0;
}

}  // namespace

void AddClusterCheckCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "cluster-check",
      "handshake every node, then time all-reduces of 8 KB and 16 MB between all ranks (this machine + the nodes): "
      "latency, bus bandwidth, and what they mean");
  auto a = std::make_shared<CheckArgs>();
  AddClusterOptions(cmd, &a->cluster);
  cmd->add_option("--device", a->device, "this machine's CUDA device for --collective nccl (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--iterations", a->iterations, "timed all-reduces per size (default 20)");
  cmd->add_option("--warmup", a->warmup, "untimed all-reduces first (default 5)");
  cmd->callback([=] {
    UseStderrLogging(cmd);
    *exit_code = RunClusterCheck(*a);
  });
}

}  // namespace sparkserve::head
