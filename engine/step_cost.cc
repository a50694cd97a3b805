// StepCostCurve and its start-up measurement.
#include "engine/step_cost.h"

#include <algorithm>
#include <chrono>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::engine {

void StepCostCurve::Observe(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0.0)) return;
  auto [it, fresh] = points_.try_emplace(tokens, seconds);
  if (!fresh) it->second += 0.2 * (seconds - it->second);
}

double StepCostCurve::Cost(int64_t tokens) const {
  if (points_.empty()) return static_cast<double>(tokens);
  auto hi = points_.lower_bound(tokens);
  if (hi == points_.end()) {
    const auto& [t, s] = *points_.rbegin();
    return s * static_cast<double>(tokens) / static_cast<double>(t);
  }
  if (hi->first == tokens || hi == points_.begin()) return hi->second;
  auto lo = std::prev(hi);
  const double f = static_cast<double>(tokens - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

std::vector<StepCostPoint> StepCostCurve::Points() const {
  std::vector<StepCostPoint> out;
  for (const auto& [t, s] : points_) out.push_back({static_cast<int32_t>(t), s});
  return out;
}

std::vector<int32_t> StepCostCounts(int32_t most) {
  std::vector<int32_t> counts;
  for (int32_t n = 1; n <= most; n = n < 8 ? n + 1 : n + n / 2) counts.push_back(n);
  if (!counts.empty() && counts.back() != most) counts.push_back(most);
  return counts;
}

namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<double> TimeRun(model::ModelRunner& runner, const model::StepPlan& plan) {
  const Clock::time_point start = Clock::now();
  absl::StatusOr<model::StepOutput> out = runner.Run(plan);
  if (!out.ok()) return out.status();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

model::StepPlan Prefill(const model::ModelCapacity& cap, int32_t n) {
  model::SeqWork w;
  w.slot = 0;
  w.tokens.assign(static_cast<size_t>(n), 0);
  for (int32_t p = 0; p * cap.kv_page_size < n; ++p) w.kv_pages.push_back(p);
  model::StepPlan plan;
  plan.seqs.push_back(std::move(w));
  return plan;
}

}  // namespace

absl::StatusOr<std::vector<StepCostPoint>> MeasureStepCosts(model::ModelRunner& runner,
                                                            const std::vector<int32_t>& token_counts, int reps) {
  const model::ModelCapacity cap = runner.capacity();
  std::vector<StepCostPoint> out;
  for (const int32_t n : token_counts) {
    if (n < 1 || n > cap.max_seq_len || int64_t{n} > int64_t{cap.num_kv_pages} * cap.kv_page_size) {
      return absl::InvalidArgumentError(fmt::format("cannot time a step of {} tokens on this runner", n));
    }
    const model::StepPlan plan = Prefill(cap, n);
    RETURN_IF_ERROR(TimeRun(runner, plan).status());  // warm-up
    double best = 0.0;
    for (int r = 0; r < std::max(reps, 1); ++r) {
      ASSIGN_OR_RETURN(const double s, TimeRun(runner, plan));
      best = r == 0 ? s : std::min(best, s);
    }
    out.push_back({n, best});
  }
  return out;
}

absl::StatusOr<double> MeasureMtpDraftStep(model::ModelRunner& runner, int reps) {
  if (!runner.has_mtp()) return absl::FailedPreconditionError("the model has no MTP block");
  const model::ModelCapacity cap = runner.capacity();
  double best = 0.0;
  for (int r = 0; r <= std::max(reps, 1); ++r) {
    RETURN_IF_ERROR(runner.Run(Prefill(cap, 2)).status());  // leaves the rows a DraftWork reads
    model::StepPlan plan;
    model::DraftWork d;
    d.slot = 0;
    d.start_pos = 0;
    d.tokens = {0};
    d.hidden_row = 0;
    d.num_drafts = 1;
    d.kv_pages = {0};
    plan.drafts.push_back(std::move(d));
    ASSIGN_OR_RETURN(const double s, TimeRun(runner, plan));
    if (r == 1 || (r > 1 && s < best)) best = s;  // run 0 warms up
  }
  return best;
}

}  // namespace sparkserve::engine
