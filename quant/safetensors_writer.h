// safetensors writing: one file (with `__metadata__`) or a sharded set plus its
// model.safetensors.index.json, laid out like the reference implementation (tensors ordered by
// element size then name, so each is aligned to its element size; header padded to 8 bytes).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace sparkserve::quant {

// name -> CPU tensor. Names must be unique and not "__metadata__".
using NamedTensors = std::vector<std::pair<std::string, core::Tensor>>;

// Writes `tensors` to `path` (through a temporary file renamed into place).
absl::Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` into `dir` as shards of at most `max_shard_bytes` of tensor data each (a larger
// tensor gets a shard of its own), filled greedily in the given order and named
// model-0000K-of-0000N.safetensors, plus model.safetensors.index.json
// ({"metadata": {"total_size": bytes}, "weight_map": {name: shard}}). Every shard carries `metadata`.
// Returns the shard paths.
absl::StatusOr<std::vector<std::string>> WriteShardedSafetensors(
    const std::string& dir, const NamedTensors& tensors, uint64_t max_shard_bytes,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace sparkserve::quant
