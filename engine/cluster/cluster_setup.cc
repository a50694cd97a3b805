// LoadRunner (see cluster_setup.h).
#include "engine/cluster/cluster_setup.h"

#include "core/device.h"
#include "core/status.h"
#include "engine/cluster/shard_source.h"
#include "fmt/format.h"
#include "model/config.h"
#include "model/shard_plan.h"

namespace sparkserve::engine::cluster {

absl::StatusOr<model::LoadedRunner> LoadRunner(const std::string& model_dir, const model::RunnerOptions& options,
                                               const ClusterOptions& given_cluster_options, ClusterRunner** cluster) {
  *cluster = nullptr;
  if (given_cluster_options.nodes.empty()) return model::LoadModelRunner(model_dir, options);
  ClusterOptions cluster_options = given_cluster_options;
  cluster_options.device = options.device;
  const int32_t world = static_cast<int32_t>(cluster_options.nodes.size()) + 1;
  model::RunnerOptions resolved = options;
  if (resolved.backend == model::Backend::kAuto) {  // as the runner factory: the GPU when there is one
    absl::StatusOr<std::vector<core::CudaDeviceInfo>> gpus = core::ListCudaDevices();
    resolved.backend = gpus.ok() && !gpus->empty() ? model::Backend::kCuda : model::Backend::kCpu;
  }
  // A stand-in NCCL (tests) runs on host buffers; the real one needs the CUDA backend.
  if (cluster_options.collective == CollectiveKind::kNccl && resolved.backend == model::Backend::kCpu &&
      !cluster_options.nccl) {
    return absl::InvalidArgumentError("--collective nccl needs the CUDA backend; the CPU backend uses gloo");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CheckpointShards> shards, CheckpointShards::Open(model_dir));
  const model::Qwen35Config config = shards->config();
  absl::StatusOr<model::ShardPlan> plan = model::ShardPlan::Make(0, world, config);
  if (!plan.ok()) {
    return absl::InvalidArgumentError(fmt::format("{} ranks (the head + {} node(s)) cannot split {}: {}", world,
                                                  cluster_options.nodes.size(), model_dir,
                                                  std::string(plan.status().message())));
  }
  // Rank 0 here, from its own cut, over the group the nodes join later.
  auto group = std::make_unique<core::ReplaceableCollective>(0, world);
  ASSIGN_OR_RETURN(quant::Checkpoint mine, shards->Cut(0, world));
  ASSIGN_OR_RETURN(model::LoadedRunner local,
                   model::LoadModelRunner(std::move(mine), config, *plan, group.get(), resolved));
  const std::string local_description = local.backend_description;
  ASSIGN_OR_RETURN(std::unique_ptr<ClusterRunner> runner,
                   ClusterRunner::Create(std::move(group), std::move(local.runner), resolved, std::move(shards),
                                         cluster_options));
  model::LoadedRunner out;
  out.config = config;
  *cluster = runner.get();
  out.runner = std::move(runner);
  out.backend_description = fmt::format("{}, tensor-parallel over {} ranks (this head + {} node(s), {})",
                                        local_description, world, cluster_options.nodes.size(),
                                        CollectiveName(cluster_options.collective));
  return out;
}

}  // namespace sparkserve::engine::cluster
