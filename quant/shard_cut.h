// CutCheckpoint: one tensor-parallel rank's shard of a checkpoint, cut on the stored layout (NVFP4
// codes and group scales, FP8 weights with their tensor / channel / block scales, dense weights),
// never dequantised. Which tensor splits how is the model's business (model/shard_cuts.h); this
// file knows how each storage format is cut.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/checkpoint.h"

namespace sparkserve::quant {

using IndexRange = std::pair<int64_t, int64_t>;  // [begin, end)

// How one checkpoint entry is cut. For a module (a Linear/Embedding, named without ".weight"):
// kRows keeps `ranges` of its output rows, kCols `ranges` of its input columns (logical [out, in]
// indices), together with its scales and bias. For any other tensor (by full name): kRows keeps
// `ranges` of its first dimension; kCols is refused. Several ranges are concatenated in order.
struct TensorCut {
  enum class Axis : uint8_t { kWhole, kRows, kCols };
  Axis axis = Axis::kWhole;
  std::vector<IndexRange> ranges;

  static TensorCut Whole() { return {}; }
  static TensorCut Rows(std::vector<IndexRange> r) { return {Axis::kRows, std::move(r)}; }
  static TensorCut Cols(std::vector<IndexRange> r) { return {Axis::kCols, std::move(r)}; }
};

using ShardCuts = std::map<std::string, TensorCut, std::less<>>;

// The checkpoint holding exactly the entries of `cuts`, each cut as it says (same tensor names; a
// whole tensor or one row range is a view of `full`'s memory, the rest are copies). Errors name the
// entry: absent from `full`, a range outside its shape, or a cut the storage format cannot make
// (NVFP4 input columns must split at multiples of its 16-element groups; FP8 block scales at
// multiples of the block).
absl::StatusOr<Checkpoint> CutCheckpoint(const Checkpoint& full, const ShardCuts& cuts, const std::string& label);

}  // namespace sparkserve::quant
