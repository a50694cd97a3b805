// WholeCheckpointSource (see shard_source.h).
#include "engine/cluster/shard_source.h"

#include <fstream>
#include <sstream>

#include "fmt/format.h"

namespace sparkserve::engine::cluster {

absl::StatusOr<std::unique_ptr<WholeCheckpointSource>> WholeCheckpointSource::Open(const std::string& model_dir) {
  std::ifstream in(std::filesystem::path(model_dir) / "config.json", std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: no config.json", model_dir));
  std::ostringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<quant::SafetensorsCheckpoint> files = quant::SafetensorsCheckpoint::Open(model_dir);
  if (!files.ok()) return files.status();
  return std::unique_ptr<WholeCheckpointSource>(new WholeCheckpointSource(ss.str(), *std::move(files)));
}

absl::StatusOr<proto::RankShard> WholeCheckpointSource::Shard(int32_t rank, int32_t world) {
  proto::RankShard s;
  s.rank = rank;
  s.world = world;
  s.config_json = config_json_;
  for (const std::string& name : files_.Names()) {
    absl::StatusOr<core::Tensor> t = files_.Get(name);
    if (!t.ok()) return t.status();
    s.tensors.push_back({name, *std::move(t)});
  }
  return s;
}

}  // namespace sparkserve::engine::cluster
