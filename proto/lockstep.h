// The lockstep check (DESIGN.md §5): after every step each rank adds a digest of what it ran (the
// step's index, the encoded plan as it was sent or received, and what its output holds that every
// rank computes alike) to the collective, and all compare. A mismatch is an error on every rank at
// once (Aborted, naming the step and the digests), never a hang or a silent divergence.
#pragma once
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "core/collective.h"
#include "model/model_runner.h"

namespace sparkserve::proto {

// 64 bits of SHA-256 over: index, plan bytes, and of `output` (host tensors only): the logits'
// shape and 16 evenly spaced values of each row (bits), the row offsets, every sampled row (status,
// id), every draft token. Runners must give every rank the same values in these fields (the CPU
// runner gathers full-vocab logits on every rank).
uint64_t StepDigest(uint64_t index, std::string_view plan_bytes, const model::StepOutput& output);

// Exchanges `digest` with every rank of `group` (one all-reduce of 4 floats a rank, each holding 16
// bits exactly). OK when all are equal; Aborted otherwise; the collective's own error when the
// exchange fails.
absl::Status CheckLockstep(core::Collective& group, uint64_t index, uint64_t digest);

}  // namespace sparkserve::proto
