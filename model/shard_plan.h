// ShardPlan: how one tensor-parallel rank r of N splits each Qwen3.5 parameter (DESIGN.md §5):
// attention q (with its per-head gate) / k / v by head (KV heads replicated when N exceeds them, as
// vLLM does), GDN q/k/v/z/a/b/conv/A_log/dt_bias by head (value heads stay with their key head),
// MLP gate/up by feature; o_proj, out_proj and down_proj by input feature (their outputs are partial
// sums, all-reduced); lm_head by vocab (uneven when N does not divide it); embeddings, norms and
// the MTP fc replicated; the MTP layer like a main attention layer. model/shard_cuts.h turns this
// into the cuts of each checkpoint tensor.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/config.h"

namespace sparkserve::model {

using Range = std::pair<int64_t, int64_t>;  // [begin, end)

struct ShardPlan {
  int32_t rank = 0;
  int32_t world = 1;

  // Checks 0 <= rank < world and that world divides the attention heads, GDN key and value heads
  // and the MLP width, and divides or is a multiple of the KV heads (the vocab may split unevenly).
  // Errors name the config field and both counts.
  static absl::StatusOr<ShardPlan> Make(int32_t rank, int32_t world, const Qwen35Config& config);
  // This rank's contiguous part of `total` items: [rank * total / world, (rank + 1) * total / world).
  Range Part(int64_t total) const {
    return {rank * total / world, (rank + 1) * total / world};
  }
};

// Per-rank sizes derived from a config and a plan.
struct RankShapes {
  int64_t heads = 0, kv_heads = 0;     // attention heads on this rank (kv_heads >= 1: replicated past world = KV)
  Range kv_range;                      // this rank's KV heads among the model's
  int64_t nk = 0, nv = 0;              // GDN key / value heads on this rank
  int64_t ffn = 0;                     // MLP width on this rank
  Range vocab;                         // lm_head rows on this rank
  int64_t dk = 0, dv = 0;              // GDN head dims (unsplit)
  int64_t conv_channels() const { return 2 * nk * dk + nv * dv; }
  static RankShapes Of(const Qwen35Config& config, const ShardPlan& plan);
};

// Scales a range by `unit` (head index range -> element range of heads of `unit` elements).
inline Range Times(Range r, int64_t unit) { return {r.first * unit, r.second * unit}; }
inline Range Shift(Range r, int64_t by) { return {r.first + by, r.second + by}; }

}  // namespace sparkserve::model
