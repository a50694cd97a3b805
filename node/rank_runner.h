// BuildRankRunner: a node's model runner for its rank, from the shard the head shipped (the rank's
// tensors by name, as model/shard_cuts.h cut them on the packed layout, + config.json's text) and
// the runner options the head resolved, over the node's collective. The node never reads a model
// directory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "model/runner_factory.h"
#include "proto/shard_wire.h"

namespace sparkserve::node {

// `collective` (rank `rank` of `world`) must outlive the runner.
absl::StatusOr<model::LoadedRunner> BuildRankRunner(const std::string& config_json,
                                                    std::vector<proto::NamedTensor> tensors,
                                                    const model::RunnerOptions& options, int32_t rank, int32_t world,
                                                    core::Collective* collective);

}  // namespace sparkserve::node
