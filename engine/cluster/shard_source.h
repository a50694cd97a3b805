// The shards the head ships to its nodes. WholeCheckpointSource gives every rank the checkpoint's
// tensors as stored (views of the mapped files, nothing copied); the node's CPU binding then cuts
// its rank's part. It stands in until the head cuts rank-local shards on the packed layout.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/cluster/cluster_runner.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::engine::cluster {

class WholeCheckpointSource : public ShardSource {
 public:
  static absl::StatusOr<std::unique_ptr<WholeCheckpointSource>> Open(const std::string& model_dir);
  absl::StatusOr<proto::RankShard> Shard(int32_t rank, int32_t world) override;

 private:
  WholeCheckpointSource(std::string config_json, quant::SafetensorsCheckpoint files)
      : config_json_(std::move(config_json)), files_(std::move(files)) {}
  std::string config_json_;
  quant::SafetensorsCheckpoint files_;
};

}  // namespace sparkserve::engine::cluster
