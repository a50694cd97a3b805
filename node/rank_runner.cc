// BuildRankRunner (see rank_runner.h). Until the head ships rank-local shards cut on the packed
// layout (quant/shard_cut.h), it ships the checkpoint's tensors whole and the CPU binding cuts this
// rank's part (Qwen35Weights::Load with the rank's ShardPlan), as LoadCpuModel does from a directory.
#include "node/rank_runner.h"

#include <map>

#include "core/status.h"
#include "fmt/format.h"
#include "model/config.h"
#include "model/cpu/cpu_model_runner.h"
#include "model/qwen35_weights.h"
#include "model/shard_plan.h"
#include "model/weight_source.h"

namespace sparkserve::node {

absl::StatusOr<model::LoadedRunner> BuildRankRunner(const std::string& config_json,
                                                    std::vector<proto::NamedTensor> tensors,
                                                    const model::RunnerOptions& s, int32_t rank, int32_t world,
                                                    core::Collective* collective) {
  if (s.backend != model::Backend::kCpu) {
    return absl::UnimplementedError(fmt::format(
        "this node builds CPU runners only so far (the head asked for backend '{}')", model::BackendName(s.backend)));
  }
  if (s.max_batch < 1 || s.max_seq_len < 2 || s.kv_page_size < 1 || s.max_step_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format(
        "max_batch ({}), max_seq_len ({}), max_step_tokens ({}) and the KV page size ({}) must be positive",
        s.max_batch, s.max_seq_len, s.max_step_tokens, s.kv_page_size));
  }
  ASSIGN_OR_RETURN(model::Qwen35Config config, model::ParseQwen35Config(config_json, "the head's config.json"));
  ASSIGN_OR_RETURN(model::ShardPlan plan, model::ShardPlan::Make(rank, world, config));
  std::map<std::string, core::Tensor> by_name;
  for (proto::NamedTensor& t : tensors) by_name.emplace(std::move(t.name), std::move(t.tensor));
  tensors.clear();
  model::MapWeightSource source(std::move(by_name));
  ASSIGN_OR_RETURN(model::Qwen35Weights weights, model::Qwen35Weights::Load(config, source, plan));
  model::cpu::CpuRunnerOptions o;
  o.max_seq_len = s.max_seq_len;
  o.state.num_slots = s.max_batch;
  o.state.kv_page_size = s.kv_page_size;
  o.state.num_kv_pages = s.max_batch * ((s.max_seq_len + s.kv_page_size - 1) / s.kv_page_size);
  o.state.max_verify_tokens = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<model::cpu::CpuModelRunner> runner,
                   model::cpu::CpuModelRunner::Create(config, std::move(weights), plan, collective, o));
  model::LoadedRunner out;
  out.config = config;
  out.runner = std::move(runner);
  out.backend_description = "cpu";
  return out;
}

}  // namespace sparkserve::node
