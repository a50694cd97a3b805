// Loading a CpuModelRunner from a model directory (config.json, generation_config.json,
// safetensors) for one tensor-parallel rank.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/cpu/cpu_model_runner.h"
#include "quant/checkpoint.h"

namespace sparkserve::model::cpu {

// Reads the config, cuts rank `rank` of `world`'s shard (model/shard_cuts.h), binds it (dequantised
// to f32) and builds the runner. `collective` may be null for one rank.
absl::StatusOr<std::unique_ptr<CpuModelRunner>> LoadCpuModel(const std::string& model_dir,
                                                              const CpuRunnerOptions& options,
                                                              int32_t rank = 0, int32_t world = 1,
                                                              core::Collective* collective = nullptr);
// The same from a rank's shard in hand (what a node rebuilt from the shard its head shipped).
absl::StatusOr<std::unique_ptr<CpuModelRunner>> LoadCpuModel(quant::Checkpoint shard, const Qwen35Config& config,
                                                              const ShardPlan& plan, core::Collective* collective,
                                                              const CpuRunnerOptions& options);

}  // namespace sparkserve::model::cpu
