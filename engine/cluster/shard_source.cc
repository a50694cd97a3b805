// CheckpointShards (see shard_source.h).
#include "engine/cluster/shard_source.h"

#include <fstream>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "model/shard_cuts.h"
#include "model/shard_plan.h"

namespace sparkserve::engine::cluster {

absl::StatusOr<std::unique_ptr<CheckpointShards>> CheckpointShards::Open(const std::string& model_dir) {
  std::ifstream in(std::filesystem::path(model_dir) / "config.json", std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: no config.json", model_dir));
  std::ostringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(model::Qwen35Config config, model::LoadQwen35Config(model_dir));
  ASSIGN_OR_RETURN(quant::Checkpoint full, quant::Checkpoint::Open(model_dir));
  return std::unique_ptr<CheckpointShards>(new CheckpointShards(text.str(), std::move(config), std::move(full)));
}

absl::StatusOr<quant::Checkpoint> CheckpointShards::Cut(int32_t rank, int32_t world) const {
  ASSIGN_OR_RETURN(model::ShardPlan plan, model::ShardPlan::Make(rank, world, config_));
  return model::CutShard(full_, config_, plan);
}

absl::StatusOr<proto::RankShard> CheckpointShards::Shard(int32_t rank, int32_t world) {
  ASSIGN_OR_RETURN(quant::Checkpoint cut, Cut(rank, world));
  proto::RankShard s;
  s.rank = rank;
  s.world = world;
  s.config_json = config_json_;
  for (const auto& [name, tensor] : cut.tensors()) s.tensors.push_back({name, tensor});
  return s;
}

}  // namespace sparkserve::engine::cluster
