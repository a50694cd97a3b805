// Sampling over a vocabulary split across tensor-parallel ranks (each rank holds the logits of its
// lm_head rows, ShardPlan::Part of the vocabulary): the host-side decisions, shared by the CUDA
// runner and its tests. A step's rows are sampled one of two ways, chosen from the RowSamplings
// alone (the same on every rank, so all ranks exchange the same things in the same order):
//   - candidates: every row is greedy, or draws from a top_k of at most kMaxSplitCandidates, and
//     asks no logprobs. Each rank processes its slice (banned ids, logit_bias, penalties: per-id
//     operations, so a slice needs only the ids inside it) and sends its best min(k_row, slice)
//     (value, id) pairs, best first with the lower id first on equal values, padded with
//     (-inf, -1). Laid side by side in rank order, these form a "candidate row" of world * k
//     values in which equal values keep the global ids' order (ranks hold ascending id ranges).
//     The global top k (and the argmax) is among them, and sampling the candidate row with the
//     row's own parameters and lists emptied draws exactly what sampling the full row would: the
//     same max, min_p threshold, top_k set and order, top_p mass and draw (checked against
//     engine::Sampler in tests/unit/model/split_vocab_sampling_test.cc). A NaN in a processed slice
//     travels as its first candidate, so the candidate row fails as the full row would.
//   - full rows: otherwise (temperature without top_k, top_p alone, top_k past the cap, logprobs),
//     every rank gathers the whole rows and samples them as one GPU does.
// Either way every rank computes the same ids from the same gathered bits, so the ranks stay in
// lockstep.
#pragma once
#include <cstdint>
#include <span>

#include "model/row_sampling.h"
#include "model/shard_plan.h"

namespace sparkserve::model {

// Below this temperature a row is greedy (engine::kGreedyTemperature and the GPU sampler agree).
inline constexpr float kSplitGreedyTemperature = 1e-5f;
// Most candidates a rank sends per row (kernels::cuda::kMaxGpuCandidates, the GPU sampler's top_k cap).
inline constexpr int32_t kMaxSplitCandidates = 1024;

struct SplitSamplingPlan {
  bool candidates = false;  // false: gather full rows
  int32_t k = 0;            // candidates per rank and row (the candidate row holds world * k)
};

// How a step with these rows samples over a vocabulary of `vocab` ids (see above). No rows: no
// exchange is needed (candidates with k = 0).
SplitSamplingPlan PlanSplitSampling(std::span<const RowSampling> rows, int64_t vocab);

// The candidates row `row` asks of each rank: 1 for a greedy row, else its top_k (the plan's k
// bounds it).
int32_t CandidatesOf(const RowSampling& row);

// `row` as one rank applies it to its slice: banned ids, logit_bias and the penalty history
// restricted to ids in `slice` and made 0-based (id - slice.first); everything else unchanged.
RowSampling RestrictToSlice(const RowSampling& row, Range slice);

// `row` as the candidate row is sampled: the same parameters and draw, no lists (the ranks have
// applied them), no logprobs.
RowSampling ForCandidateRow(const RowSampling& row);

}  // namespace sparkserve::model
