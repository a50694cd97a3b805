// Loading a CpuModelRunner from a model directory (config.json, generation_config.json,
// safetensors) for one tensor-parallel rank.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/cpu/cpu_model_runner.h"

namespace sparkserve::model::cpu {

// Reads the config, binds rank `plan`'s shard of the weights (dequantised to f32) and builds the
// runner. `collective` may be null for one rank.
absl::StatusOr<std::unique_ptr<CpuModelRunner>> LoadCpuModel(const std::string& model_dir,
                                                              const CpuRunnerOptions& options,
                                                              int32_t rank = 0, int32_t world = 1,
                                                              core::Collective* collective = nullptr);

}  // namespace sparkserve::model::cpu
