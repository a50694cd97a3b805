// LoadCpuModel: config + checkpoint -> a rank's shard -> f32 weights -> CpuModelRunner.
#include "model/cpu/cpu_model_loader.h"

#include "core/status.h"
#include "model/checkpoint_weight_source.h"
#include "model/config.h"
#include "model/shard_cuts.h"

namespace sparkserve::model::cpu {

absl::StatusOr<std::unique_ptr<CpuModelRunner>> LoadCpuModel(const std::string& model_dir,
                                                              const CpuRunnerOptions& options,
                                                              int32_t rank, int32_t world,
                                                              core::Collective* collective) {
  ASSIGN_OR_RETURN(Qwen35Config config, LoadQwen35Config(model_dir));
  ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Make(rank, world, config));
  ASSIGN_OR_RETURN(quant::Checkpoint full, quant::Checkpoint::Open(model_dir));
  ASSIGN_OR_RETURN(quant::Checkpoint shard, CutShard(full, config, plan));
  return LoadCpuModel(std::move(shard), config, plan, collective, options);
}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> LoadCpuModel(quant::Checkpoint shard, const Qwen35Config& config,
                                                              const ShardPlan& plan, core::Collective* collective,
                                                              const CpuRunnerOptions& options) {
  const CheckpointWeightSource source(std::move(shard));
  ASSIGN_OR_RETURN(Qwen35Weights weights, Qwen35Weights::Load(config, source, plan));
  return CpuModelRunner::Create(config, std::move(weights), plan, collective, options);
}

}  // namespace sparkserve::model::cpu
