// A tensor-parallel rank's shard as it travels from the head to a node (LoadShard): its tensors by
// name, the model's config and calibration, and the runner's options; and the conversions between
// these and their node.proto forms.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/runner_factory.h"
#include "proto/node.pb.h"

namespace sparkserve::proto {

struct NamedTensor {
  std::string name;    // the checkpoint's tensor name
  core::Tensor tensor; // CPU, contiguous: this rank's slice (or the whole tensor when replicated)
};

// Everything a node needs to build rank `rank`'s runner.
struct RankShard {
  int32_t rank = 0;
  int32_t world = 1;
  std::string config_json;       // config.json's text
  std::string calibration;       // calibration data outside the tensors (may be empty)
  std::vector<NamedTensor> tensors;
};

DType DTypeToWire(core::DType d);
absl::StatusOr<core::DType> DTypeFromWire(DType d);

RunnerSettings RunnerSettingsToWire(const model::RunnerOptions& o);
// InvalidArgument naming the field for an unknown backend or dtype name.
absl::StatusOr<model::RunnerOptions> RunnerSettingsFromWire(const RunnerSettings& s);

// The manifest entry of `t` (its SHA-256 computed here).
ShardTensor DescribeTensor(const NamedTensor& t);
// SHA-256 over (name, sha256) of every tensor of `offer`, in order: the shard's identity.
std::string ShardDigest(const ShardOffer& offer);

}  // namespace sparkserve::proto
