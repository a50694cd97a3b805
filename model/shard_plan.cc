// ShardPlan validation and the row/column slicing used to cut a rank's shard.
#include "model/shard_plan.h"

#include <cstring>
#include <string>

#include "fmt/format.h"

namespace sparkserve::model {

absl::StatusOr<ShardPlan> ShardPlan::Make(int32_t rank, int32_t world, const Qwen35Config& c) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(fmt::format("bad tensor-parallel rank {} of {}", rank, world));
  }
  const std::pair<const char*, int64_t> counts[] = {
      {"num_attention_heads", c.num_attention_heads},     {"num_key_value_heads", c.num_key_value_heads},
      {"linear_num_key_heads", c.linear_num_key_heads},   {"linear_num_value_heads", c.linear_num_value_heads},
      {"intermediate_size", c.intermediate_size}};
  for (const auto& [name, n] : counts) {
    if (n % world != 0) {
      return absl::InvalidArgumentError(
          fmt::format("tensor parallel size {} does not divide {} = {}", world, name, n));
    }
  }
  return ShardPlan{rank, world};
}

RankShapes RankShapes::Of(const Qwen35Config& c, const ShardPlan& p) {
  RankShapes s;
  s.heads = c.num_attention_heads / p.world;
  s.kv_heads = c.num_key_value_heads / p.world;
  s.nk = c.linear_num_key_heads / p.world;
  s.nv = c.linear_num_value_heads / p.world;
  s.ffn = c.intermediate_size / p.world;
  s.vocab = p.Part(c.vocab_size);
  s.dk = c.linear_key_head_dim;
  s.dv = c.linear_value_head_dim;
  return s;
}

core::Tensor TakeRows(const core::Tensor& t, const std::vector<Range>& ranges) {
  const int64_t row = t.dim(0) == 0 ? 0 : t.numel() / t.dim(0);
  int64_t rows = 0;
  for (const auto& r : ranges) rows += r.second - r.first;
  core::Shape shape = t.shape();
  shape[0] = rows;
  core::Tensor out = core::Tensor::Empty(shape, core::DType::kF32);
  float* dst = out.data<float>();
  for (const auto& r : ranges) {
    const size_t n = static_cast<size_t>((r.second - r.first) * row);
    std::memcpy(dst, t.data<float>() + r.first * row, n * sizeof(float));
    dst += n;
  }
  return out;
}

core::Tensor TakeCols(const core::Tensor& t, const std::vector<Range>& ranges) {
  int64_t cols = 0;
  for (const auto& r : ranges) cols += r.second - r.first;
  const int64_t rows = t.dim(0), in_cols = t.dim(1);
  core::Tensor out = core::Tensor::Empty({rows, cols}, core::DType::kF32);
  float* dst = out.data<float>();
  for (int64_t i = 0; i < rows; ++i) {
    for (const auto& r : ranges) {
      const size_t n = static_cast<size_t>(r.second - r.first);
      std::memcpy(dst, t.data<float>() + i * in_cols + r.first, n * sizeof(float));
      dst += n;
    }
  }
  return out;
}

}  // namespace sparkserve::model
