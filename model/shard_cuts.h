// ShardCutsFor / CutShard: one tensor-parallel rank's shard of a Qwen3.5 checkpoint (DESIGN.md §5):
// which tensor is cut how (model/shard_plan.h says why), cut on the stored layout by
// quant/shard_cut.h. Every runner binds its weights from such a rank-local checkpoint, tp = 1
// included (then every cut is whole and the shard is a view of the checkpoint); a head ships each
// node its shard's tensors and the node rebuilds the same checkpoint from them.
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "quant/checkpoint.h"
#include "quant/shard_cut.h"

namespace sparkserve::model {

// The cuts of every tensor the text model and the MTP block (when the config asks for it and the
// checkpoint has it) read; other tensors (the vision tower) are not part of a shard.
absl::StatusOr<quant::ShardCuts> ShardCutsFor(const Qwen35Config& config, const ShardPlan& plan,
                                              const quant::Checkpoint& full);

// Rank plan.rank's shard of `full`.
absl::StatusOr<quant::Checkpoint> CutShard(const quant::Checkpoint& full, const Qwen35Config& config,
                                           const ShardPlan& plan);

}  // namespace sparkserve::model
