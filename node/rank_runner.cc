// BuildRankRunner (see rank_runner.h): the shard's tensors become the rank-local checkpoint again
// (quant::Checkpoint::FromTensors, quantized as the config says) and the runner factory builds the
// rank's runner from it, as the head builds its own from its cut.
#include "node/rank_runner.h"

#include <map>

#include "core/status.h"
#include "fmt/format.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "quant/checkpoint.h"
#include "quant/compressed_tensors.h"

namespace sparkserve::node {

absl::StatusOr<model::LoadedRunner> BuildRankRunner(const std::string& config_json,
                                                    std::vector<proto::NamedTensor> tensors,
                                                    const model::RunnerOptions& options, int32_t rank, int32_t world,
                                                    core::Collective* collective) {
  ASSIGN_OR_RETURN(model::Qwen35Config config, model::ParseQwen35Config(config_json, "the head's config.json"));
  ASSIGN_OR_RETURN(model::ShardPlan plan, model::ShardPlan::Make(rank, world, config));
  std::optional<quant::QuantizationConfig> qconfig;
  if (!config.quantization_config_json.empty()) {
    ASSIGN_OR_RETURN(qconfig,
                     quant::ParseQuantizationConfig(config.quantization_config_json, "the head's config.json"));
  }
  std::map<std::string, core::Tensor, std::less<>> by_name;
  for (proto::NamedTensor& t : tensors) by_name.emplace(std::move(t.name), std::move(t.tensor));
  tensors.clear();
  ASSIGN_OR_RETURN(quant::Checkpoint shard,
                   quant::Checkpoint::FromTensors(std::move(by_name), std::move(qconfig),
                                                  fmt::format("rank {} of {}'s shard", rank, world)));
  return model::LoadModelRunner(std::move(shard), config, plan, collective, options);
}

}  // namespace sparkserve::node
