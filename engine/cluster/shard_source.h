// CheckpointShards: the shards the head ships to its nodes, and its own: rank r's cut of the
// checkpoint (model/shard_cuts.h, on the packed layout with its scales: never dequantised), as the
// tensors a node rebuilds the same rank-local checkpoint from. The checkpoint stays mapped; whole
// tensors and row ranges are views of it, the rest copies made per cut.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/cluster/cluster_runner.h"
#include "model/config.h"
#include "quant/checkpoint.h"

namespace sparkserve::engine::cluster {

class CheckpointShards : public ShardSource {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointShards>> Open(const std::string& model_dir);
  const model::Qwen35Config& config() const { return config_; }
  // Rank `rank` of `world`'s shard. InvalidArgument (naming the config field and both counts) when
  // `world` cannot split the model.
  absl::StatusOr<quant::Checkpoint> Cut(int32_t rank, int32_t world) const;
  absl::StatusOr<proto::RankShard> Shard(int32_t rank, int32_t world) override;

 private:
  CheckpointShards(std::string config_json, model::Qwen35Config config, quant::Checkpoint full)
      : config_json_(std::move(config_json)), config_(std::move(config)), full_(std::move(full)) {}
  std::string config_json_;
  model::Qwen35Config config_;
  quant::Checkpoint full_;
};

}  // namespace sparkserve::engine::cluster
