// RunClusterCheck and JudgeClusterCheck (see cluster_check.h).
#include "engine/cluster/cluster_check.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "engine/cluster/group_join.h"
#include "engine/cluster/net_address.h"
#include "fmt/format.h"

namespace sparkserve::engine::cluster {
namespace {

using Clock = std::chrono::steady_clock;

bool IsLoopback(const std::string& host) { return host.rfind("127.", 0) == 0 || host == "::1"; }

}  // namespace

absl::StatusOr<ClusterCheckResult> RunClusterCheck(const ClusterOptions& options, const std::vector<uint64_t>& sizes,
                                                   int32_t warmup, int32_t iterations) {
  if (options.nodes.empty()) return absl::InvalidArgumentError("cluster-check needs --nodes");
  if (warmup < 0 || iterations < 1) return absl::InvalidArgumentError("iterations must be >= 1, warm-up >= 0");
  ClusterCheckResult out;
  out.targets = options.nodes;
  out.world = static_cast<int32_t>(options.nodes.size()) + 1;
  std::mutex lost_mu;
  std::string lost;
  std::vector<std::unique_ptr<NodeClient>> links;
  std::vector<GroupMember> members;
  for (size_t i = 0; i < options.nodes.size(); ++i) {
    ConnectOptions co;
    co.token = options.token;
    co.tls_ca_pem = options.tls_ca_pem;
    co.timeout = options.connect_timeout;
    co.tp_rank = static_cast<int32_t>(i) + 1;
    co.tp_world_size = out.world;
    absl::StatusOr<std::unique_ptr<NodeClient>> c = NodeClient::Connect(options.nodes[i], co);
    if (!c.ok()) return c.status();
    if (absl::Status st = (*c)->Attach([&](const std::string& why) {
          std::lock_guard<std::mutex> lock(lost_mu);
          if (lost.empty()) lost = why;
        });
        !st.ok()) {
      return st;
    }
    out.nodes.push_back((*c)->node());
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(options.nodes[i]);
    if (!hp.ok()) return hp.status();
    absl::StatusOr<std::string> ip = ResolveHost(hp->first);
    if (!ip.ok()) return ip.status();
    members.push_back({c->get(), static_cast<int32_t>(i) + 1, *ip});
    links.push_back(*std::move(c));
  }
  absl::StatusOr<std::string> head_host = LocalAddressFacing(members.front().host);
  if (!head_host.ok()) return head_host.status();
  GroupOptions go;
  go.kind = options.collective;
  go.head_device = options.device;
  go.nccl = options.nccl;
  go.head_host = *head_host;
  go.op_timeout = options.op_timeout;
  absl::StatusOr<std::unique_ptr<core::Collective>> group = JoinGroup(members, go);
  if (!group.ok()) return group.status();
  out.transport = (*group)->transport();

  auto failure = [&](const absl::Status& st) {
    std::lock_guard<std::mutex> lock(lost_mu);
    return lost.empty() ? st : absl::UnavailableError(fmt::format("{} ({})", lost, std::string(st.message())));
  };
  const int32_t n = out.world;
  const float expected = static_cast<float>(n * (n + 1) / 2);
  for (uint64_t bytes : sizes) {
    const uint64_t floats = std::max<uint64_t>(1, bytes / sizeof(float));
    for (auto& link : links) {
      if (absl::Status st = link->SendCollectiveCheck({floats}, static_cast<uint32_t>(warmup + iterations)); !st.ok()) {
        return failure(st);
      }
    }
    std::vector<float> data(floats);
    std::vector<double> us;
    for (int32_t it = 0; it < warmup + iterations; ++it) {
      std::fill(data.begin(), data.end(), 1.0f);  // rank 0 contributes 1, rank r contributes r + 1
      const auto t0 = Clock::now();
      if (absl::Status st = (*group)->AllReduceSum(data); !st.ok()) return failure(st);
      if (it >= warmup) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    if (data.front() != expected || data.back() != expected) {
      return absl::DataLossError(fmt::format("the all-reduce of {} bytes summed to {}, expected {}", bytes,
                                             data.front(), expected));
    }
    std::sort(us.begin(), us.end());
    AllReduceTiming t;
    t.bytes = floats * sizeof(float);
    t.iterations = iterations;
    t.median_us = us[us.size() / 2];
    t.min_us = us.front();
    t.algbw_gbs = static_cast<double>(t.bytes) / (t.median_us * 1e-6) / 1e9;
    t.busbw_gbs = t.algbw_gbs * 2.0 * (n - 1) / n;
    out.timings.push_back(t);
  }
  for (auto& link : links) {
    (void)link->Shutdown("cluster-check done");
    link->Close();
  }
  return out;
}

std::vector<std::string> JudgeClusterCheck(const ClusterCheckResult& r) {
  std::vector<std::string> notes;
  bool loopback = true;
  for (const std::string& t : r.targets) {
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(t);
    absl::StatusOr<std::string> ip = hp.ok() ? ResolveHost(hp->first) : hp.status();
    if (!ip.ok() || !IsLoopback(*ip)) loopback = false;
  }
  if (loopback) {
    notes.push_back("every node is on this machine (loopback): these figures measure memory copies and the kernel's "
                    "TCP stack, not a network link");
  }
  const bool gloo = r.transport.find("gloo") != std::string::npos;
  if (gloo) {
    notes.push_back(
        "the collective is Gloo over TCP sockets (the CPU path, and --collective gloo on GPUs): expect tens of "
        "microseconds per small all-reduce at best and a fraction of the link's bandwidth; on DGX Sparks use "
        "--collective nccl over the ConnectX-7 link (RoCE) for tensor parallelism on the GPUs");
  }
  const AllReduceTiming* big = nullptr;
  const AllReduceTiming* small = nullptr;
  for (const AllReduceTiming& t : r.timings) {
    if (!big || t.bytes > big->bytes) big = &t;
    if (!small || t.bytes < small->bytes) small = &t;
  }
  if (!loopback && big != nullptr && big->bytes >= (1u << 20)) {
    // A ConnectX-7 port gives ~25 GB/s (200 Gb/s) between two Sparks; nccl-tests sees ~20+ GB/s
    // bus bandwidth on RoCE, and ~1 GB/s or less when NCCL falls back to its socket transport.
    if (big->busbw_gbs < 2.0) {
      notes.push_back(fmt::format(
          "SLOW: {:.2f} GB/s bus bandwidth at {} MiB is far below a 200 Gb/s ConnectX-7 link (~20 GB/s with RoCE): "
          "the traffic runs over TCP sockets or a slow interface. With NCCL: run with NCCL_DEBUG=INFO and look for "
          "'NET/Socket' (the fallback) instead of 'NET/IB'; set NCCL_IB_HCA to the ConnectX-7 devices (e.g. "
          "mlx5_0,mlx5_1: both halves of the port) and NCCL_SOCKET_IFNAME to the link's interface (e.g. enp1s0f0np0), "
          "check MTU 9000 on both ends and that the cable is in the CX-7 port, not the 10 GbE one",
          big->busbw_gbs, big->bytes >> 20));
    } else if (big->busbw_gbs < 10.0) {
      notes.push_back(fmt::format(
          "{:.2f} GB/s bus bandwidth at {} MiB: below what a 200 Gb/s link gives (~20 GB/s); check that NCCL uses "
          "both ConnectX-7 halves (NCCL_IB_HCA) and MTU 9000",
          big->busbw_gbs, big->bytes >> 20));
    }
  }
  if (!loopback && small != nullptr && small->bytes <= 65536 && small->median_us > 200.0) {
    notes.push_back(fmt::format(
        "{:.0f} us for a {} KB all-reduce: every layer pays this twice (64 times a step for the 4B); between two "
        "Sparks NCCL over RoCE takes ~30 us",
        small->median_us, small->bytes >> 10));
  }
  return notes;
}

}  // namespace sparkserve::engine::cluster
