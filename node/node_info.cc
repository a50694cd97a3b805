// Host and device discovery for Hello (see node_info.h).
#include "node/node_info.h"

#include <unistd.h>

#include <thread>

#include "core/device.h"
#include "fmt/format.h"
#include "proto/protocol.h"
#include "sparkserve/version.h"
#include "spdlog/spdlog.h"

namespace sparkserve::node {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void DescribeThisNode(proto::AuthenticateResponse* out) {
  out->set_node_name(Hostname());
  proto::DeviceInfo* cpu = out->add_devices();
  cpu->set_kind("cpu");
  cpu->set_index(0);
  cpu->set_name("cpu");
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) cpu->set_total_memory_bytes(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size));
  cpu->set_multiprocessors(std::thread::hardware_concurrency());

  proto::NodeCapabilities* caps = out->mutable_capabilities();
  caps->add_backends("cpu");
  caps->add_collectives("gloo");
  caps->set_cuda_archs(kCudaArchs);
  caps->set_max_chunk_bytes(proto::kMaxChunkBytes);

  if (!core::CudaCompiledIn()) return;
  absl::StatusOr<std::vector<core::CudaDeviceInfo>> gpus = core::ListCudaDevices();
  if (!gpus.ok()) {
    spdlog::info("no CUDA device for this node: {}", std::string(gpus.status().message()));
    return;
  }
  for (const core::CudaDeviceInfo& g : *gpus) {
    proto::DeviceInfo* d = out->add_devices();
    d->set_kind("cuda");
    d->set_index(g.index);
    d->set_name(g.name);
    d->set_total_memory_bytes(g.total_memory);
    d->set_compute_capability(fmt::format("{}.{}", g.major, g.minor));
    d->set_multiprocessors(static_cast<uint32_t>(g.multiprocessors));
  }
  caps->add_backends("cuda");
  caps->add_collectives("nccl");
}

}  // namespace sparkserve::node
