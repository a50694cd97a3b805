// StepCostCurve: seconds of one engine step as a function of the tokens it feeds, measured on this
// device (MeasureStepCosts at start-up, then every step the engine runs), which the speculation
// policy weighs drafts against.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_runner.h"

namespace sparkserve::engine {

struct StepCostPoint {
  int32_t tokens = 0;
  double seconds = 0.0;
};

class StepCostCurve {
 public:
  // Each observation moves its token count's estimate a fifth of the way (the first sets it).
  void Observe(int64_t tokens, double seconds);
  // Linear between measured counts; the smallest's cost below them; beyond the largest, growing
  // in proportion to the tokens (pessimistic: an unmeasured larger step never looks cheap).
  // Without any measurement: `tokens` (only ratios matter).
  double Cost(int64_t tokens) const;
  std::vector<StepCostPoint> Points() const;
  bool empty() const { return points_.empty(); }

 private:
  std::map<int64_t, double> points_;
};

// Times forwards of one sequence of each of `token_counts` tokens (slot 0, pages 0.., prompt
// positions 0..n-1; `reps` runs each after one warm-up, the fastest kept). The runner's slot 0 and
// those pages hold garbage afterwards: call it before any request runs.
absl::StatusOr<std::vector<StepCostPoint>> MeasureStepCosts(model::ModelRunner& runner,
                                                            const std::vector<int32_t>& token_counts, int reps);
// Seconds of one MTP draft step at batch 1 (a DraftWork of one position that drafts one token).
absl::StatusOr<double> MeasureMtpDraftStep(model::ModelRunner& runner, int reps);
// The counts to measure for steps of up to `most` tokens: 1..8, then about 1.5x apart.
std::vector<int32_t> StepCostCounts(int32_t most);

}  // namespace sparkserve::engine
