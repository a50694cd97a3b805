// ShardPlan validation and each rank's sizes.
#include "model/shard_plan.h"

#include <string>

#include "fmt/format.h"

namespace sparkserve::model {

absl::StatusOr<ShardPlan> ShardPlan::Make(int32_t rank, int32_t world, const Qwen35Config& c) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(fmt::format("bad tensor-parallel rank {} of {}", rank, world));
  }
  const std::pair<const char*, int64_t> counts[] = {
      {"num_attention_heads", c.num_attention_heads},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"intermediate_size", c.intermediate_size}};
  for (const auto& [name, n] : counts) {
    if (n % world != 0) {
      return absl::InvalidArgumentError(
          fmt::format("tensor parallel size {} does not divide {} = {}", world, name, n));
    }
  }
  const int64_t kv = c.num_key_value_heads;
  if (kv % world != 0 && world % kv != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "tensor parallel size {} neither divides nor is a multiple of num_key_value_heads = {}", world, kv));
  }
  return ShardPlan{rank, world};
}

RankShapes RankShapes::Of(const Qwen35Config& c, const ShardPlan& p) {
  RankShapes s;
  s.heads = c.num_attention_heads / p.world;
  const int64_t kv = c.num_key_value_heads;
  if (p.world <= kv) {
    s.kv_range = p.Part(kv);
  } else {  // p.world / kv ranks share each KV head (their query heads are that head's group)
    const int64_t head = static_cast<int64_t>(p.rank) * kv / p.world;
    s.kv_range = {head, head + 1};
  }
  s.kv_heads = s.kv_range.second - s.kv_range.first;
  s.nk = c.linear_num_key_heads / p.world;
  s.nv = c.linear_num_value_heads / p.world;
  s.ffn = c.intermediate_size / p.world;
  s.vocab = p.Part(c.vocab_size);
  s.dk = c.linear_key_head_dim;
  s.dv = c.linear_value_head_dim;
  return s;
}

}  // namespace sparkserve::model
