// LoadRunner (see cluster_setup.h).
#include "engine/cluster/cluster_setup.h"

#include "core/device.h"
#include "core/status.h"
#include "engine/cluster/shard_source.h"
#include "fmt/format.h"
#include "model/config.h"
#include "model/cpu/cpu_model_loader.h"
#include "model/shard_plan.h"

namespace sparkserve::engine::cluster {
namespace {

// Rank 0's runner over `group`. The CPU reference binds its part of the checkpoint as LoadModelRunner
// does for one rank (same slots and pages, so that every rank accepts the same plans).
absl::StatusOr<std::unique_ptr<model::ModelRunner>> LoadRankZero(const std::string& dir,
                                                                  const model::RunnerOptions& s,
                                                                  core::Collective* group) {
  if (s.backend != model::Backend::kCpu) {
    return absl::UnimplementedError(
        "tensor parallelism across machines runs on the CPU backend so far (--backend cpu); the CUDA runner's "
        "tensor-parallel path is not wired yet");
  }
  if (s.max_batch < 1 || s.max_seq_len < 2 || s.kv_page_size < 1 || s.max_step_tokens < 1) {
    return absl::InvalidArgumentError("max_batch, max_seq_len, max_step_tokens and the KV page size must be positive");
  }
  model::cpu::CpuRunnerOptions o;
  o.max_seq_len = s.max_seq_len;
  o.state.num_slots = s.max_batch;
  o.state.kv_page_size = s.kv_page_size;
  o.state.num_kv_pages = s.max_batch * ((s.max_seq_len + s.kv_page_size - 1) / s.kv_page_size);
  o.state.max_verify_tokens = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<model::cpu::CpuModelRunner> r,
                   model::cpu::LoadCpuModel(dir, o, 0, group->world(), group));
  return std::unique_ptr<model::ModelRunner>(std::move(r));
}

}  // namespace

absl::StatusOr<model::LoadedRunner> LoadRunner(const std::string& model_dir, const model::RunnerOptions& options,
                                               const ClusterOptions& cluster_options, CollectiveKind collective,
                                               ClusterRunner** cluster) {
  *cluster = nullptr;
  if (cluster_options.nodes.empty()) return model::LoadModelRunner(model_dir, options);
  if (collective == CollectiveKind::kNccl) {
    return absl::UnimplementedError(
        "--collective nccl is not wired yet (it comes with the CUDA runner's tensor parallelism); use --collective "
        "gloo");
  }
  const int32_t world = static_cast<int32_t>(cluster_options.nodes.size()) + 1;
  model::RunnerOptions resolved = options;
  if (resolved.backend == model::Backend::kAuto) {  // as the runner factory: the GPU when there is one
    absl::StatusOr<std::vector<core::CudaDeviceInfo>> gpus = core::ListCudaDevices();
    resolved.backend = gpus.ok() && !gpus->empty() ? model::Backend::kCuda : model::Backend::kCpu;
  }
  ASSIGN_OR_RETURN(model::Qwen35Config config, model::LoadQwen35Config(model_dir));
  if (absl::StatusOr<model::ShardPlan> plan = model::ShardPlan::Make(0, world, config); !plan.ok()) {
    return absl::InvalidArgumentError(fmt::format("{} ranks (the head + {} node(s)) cannot split {}: {}", world,
                                                  cluster_options.nodes.size(), model_dir,
                                                  std::string(plan.status().message())));
  }
  auto group = std::make_unique<core::ReplaceableCollective>(0, world);
  ASSIGN_OR_RETURN(std::unique_ptr<model::ModelRunner> local, LoadRankZero(model_dir, resolved, group.get()));
  ASSIGN_OR_RETURN(std::unique_ptr<WholeCheckpointSource> source, WholeCheckpointSource::Open(model_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<ClusterRunner> runner,
                   ClusterRunner::Create(std::move(group), std::move(local), resolved, std::move(source),
                                         cluster_options));
  model::LoadedRunner out;
  out.config = config;
  *cluster = runner.get();
  out.runner = std::move(runner);
  out.backend_description = fmt::format("cpu, tensor-parallel over {} ranks (this head + {} node(s), gloo)", world,
                                        cluster_options.nodes.size());
  return out;
}

}  // namespace sparkserve::engine::cluster
