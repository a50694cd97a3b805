// Sampling over a split vocabulary: which exchange a step needs, and each rank's view of a row.
#include "model/split_vocab_sampling.h"

#include <algorithm>

namespace sparkserve::model {

int32_t CandidatesOf(const RowSampling& row) {
  return row.temperature < kSplitGreedyTemperature ? 1 : row.top_k;
}

SplitSamplingPlan PlanSplitSampling(std::span<const RowSampling> rows, int64_t vocab) {
  SplitSamplingPlan plan;
  plan.candidates = true;
  for (const RowSampling& r : rows) {
    const bool greedy = r.temperature < kSplitGreedyTemperature;
    // top_k truncates (sampler semantics) only when 0 < top_k < vocab.
    const bool small_top_k = r.top_k > 0 && r.top_k < vocab && r.top_k <= kMaxSplitCandidates;
    if (r.num_logprobs >= 0 || !(greedy || small_top_k)) return {false, 0};
    plan.k = std::max(plan.k, CandidatesOf(r));
  }
  return plan;
}

RowSampling RestrictToSlice(const RowSampling& row, Range slice) {
  RowSampling out = row;
  auto inside = [&](int32_t id) { return id >= slice.first && id < slice.second; };
  const auto shift = [&](int32_t id) { return static_cast<int32_t>(id - slice.first); };
  out.banned.clear();
  for (const int32_t id : row.banned) {
    if (inside(id)) out.banned.push_back(shift(id));
  }
  out.bias.clear();
  for (const auto& [id, b] : row.bias) {
    if (inside(id)) out.bias.emplace_back(shift(id), b);
  }
  out.history_ids.clear();
  out.history_output_counts.clear();
  for (size_t i = 0; i < row.history_ids.size(); ++i) {
    if (!inside(row.history_ids[i])) continue;
    out.history_ids.push_back(shift(row.history_ids[i]));
    out.history_output_counts.push_back(i < row.history_output_counts.size() ? row.history_output_counts[i] : 0);
  }
  return out;
}

RowSampling ForCandidateRow(const RowSampling& row) {
  RowSampling out;
  out.temperature = row.temperature;
  out.top_k = row.top_k;
  out.top_p = row.top_p;
  out.min_p = row.min_p;
  out.uniform = row.uniform;
  out.num_logprobs = -1;
  return out;  // penalties at their neutral values: the ranks applied them
}

}  // namespace sparkserve::model
