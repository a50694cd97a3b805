// The StepPlan codec: model::StepPlan <-> its protobuf wire form (proto/step_plan.proto), so the
// head can send every rank the step and a node can replay it exactly (Decode(Encode(p)) == p).
#pragma once
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/step_plan.h"

namespace sparkserve::proto {

std::string EncodeStepPlan(const model::StepPlan& plan);
// InvalidArgument for bytes that are not a StepPlanMsg or hold values no StepPlan has (a token id
// or page past int32, an unknown logits kind, bias ids and values of different lengths).
absl::StatusOr<model::StepPlan> DecodeStepPlan(std::string_view bytes);

// Field-by-field equality (floats by bits), for tests and the lockstep digest's self-check.
bool SameStepPlan(const model::StepPlan& a, const model::StepPlan& b);

}  // namespace sparkserve::proto
