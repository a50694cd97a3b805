// --nodes / --token-file / --collective / --tls-ca / --collective-timeout (see cluster_flags.h).
#include "head/cli/cluster_flags.h"

#include <fstream>
#include <sstream>

#include "core/device.h"
#include "engine/cluster/net_address.h"
#include "fmt/format.h"
#include "proto/auth_token.h"

namespace sparkserve::head {

void AddClusterOptions(CLI::App* cmd, ClusterFlags* f) {
  cmd->add_option("--nodes", f->nodes,
                  "host:port,... of sparkserve-node daemons: this process is rank 0 and each node one more rank "
                  "(tensor parallelism = 1 + nodes); they get their shard from here");
  cmd->add_option("--token-file", f->token_file,
                  "file holding the token shared with the nodes (both sides prove it with an HMAC challenge; it never "
                  "crosses the wire). The token is the only protection: run the nodes on a private link");
  cmd->add_option("--collective", f->collective,
                  "gloo|nccl: the data plane between the ranks (default gloo on the CPU backend, nccl on CUDA)");
  cmd->add_option("--tls-ca", f->tls_ca_file,
                  "PEM root certificate(s): talk to the nodes over TLS and check their certificates (the nodes run "
                  "with --tls-cert/--tls-key)");
  cmd->add_option("--collective-timeout", f->collective_timeout_s,
                  "seconds any collective operation may wait for a peer before the step fails (a hung node), default 3");
}

model::Backend ResolveAutoBackend(model::Backend backend) {
  if (backend != model::Backend::kAuto) return backend;
  if (!core::CudaCompiledIn()) return model::Backend::kCpu;
  absl::StatusOr<std::vector<core::CudaDeviceInfo>> gpus = core::ListCudaDevices();
  return gpus.ok() && !gpus->empty() ? model::Backend::kCuda : model::Backend::kCpu;
}

absl::StatusOr<ResolvedCluster> ResolveClusterFlags(const ClusterFlags& f, model::Backend backend) {
  backend = ResolveAutoBackend(backend);
  ResolvedCluster out;
  if (f.nodes.empty()) {
    if (!f.token_file.empty() || !f.collective.empty() || !f.tls_ca_file.empty()) {
      return absl::InvalidArgumentError("--token-file, --collective and --tls-ca need --nodes");
    }
    return out;
  }
  std::stringstream ss(f.nodes);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    if (absl::StatusOr<std::pair<std::string, int>> hp = engine::cluster::SplitHostPort(item); !hp.ok()) {
      return absl::InvalidArgumentError(fmt::format("--nodes: {}", std::string(hp.status().message())));
    }
    for (const std::string& seen : out.options.nodes) {
      if (seen == item) return absl::InvalidArgumentError(fmt::format("--nodes: {} is given twice", item));
    }
    out.options.nodes.push_back(item);
  }
  if (!f.token_file.empty()) {
    absl::StatusOr<std::string> token = proto::ReadTokenFile(f.token_file);
    if (!token.ok()) return absl::InvalidArgumentError(fmt::format("--token-file: {}", std::string(token.status().message())));
    out.options.token = *std::move(token);
  }
  if (!f.tls_ca_file.empty()) {
    std::ifstream in(f.tls_ca_file, std::ios::binary);
    if (!in) return absl::InvalidArgumentError(fmt::format("--tls-ca {}: cannot open it", f.tls_ca_file));
    std::ostringstream pem;
    pem << in.rdbuf();
    out.options.tls_ca_pem = pem.str();
  }
  if (f.collective_timeout_s < 0.1 || f.collective_timeout_s > 600) {
    return absl::InvalidArgumentError("--collective-timeout must be within 0.1..600 seconds");
  }
  out.options.op_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.collective_timeout_s * 1000));
  engine::cluster::CollectiveKind& collective = out.options.collective;
  if (f.collective == "gloo") {
    collective = engine::cluster::CollectiveKind::kGloo;
  } else if (f.collective == "nccl") {
    collective = engine::cluster::CollectiveKind::kNccl;
  } else if (f.collective.empty()) {
    collective = backend == model::Backend::kCpu ? engine::cluster::CollectiveKind::kGloo
                                                 : engine::cluster::CollectiveKind::kNccl;
  } else {
    return absl::InvalidArgumentError(fmt::format("--collective '{}': use gloo or nccl", f.collective));
  }
  if (collective == engine::cluster::CollectiveKind::kNccl && backend == model::Backend::kCpu) {
    return absl::InvalidArgumentError("--collective nccl needs the CUDA backend; the CPU backend uses gloo");
  }
  return out;
}

}  // namespace sparkserve::head
