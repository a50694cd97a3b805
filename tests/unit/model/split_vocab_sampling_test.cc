// Sampling over a vocabulary split across tensor-parallel ranks (model/split_vocab_sampling.h)
// against engine::Sampler on the whole row: each simulated rank processes its slice with its
// restricted lists and keeps its best candidates (value desc, lower id first), the candidate rows
// are sampled with ForCandidateRow's parameters, and the draw must be the whole row's draw (greedy
// exactly; temperature/top-k/top-p/min-p/penalties: the same kept distribution, so the same id for
// every uniform). The GPU kernels that do the same are checked in tests/gpu/model/cuda_tp_test.cc.
#include "model/split_vocab_sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace sparkserve::model {
namespace {

// The host sampler's view of a RowSampling (as tests/unit/engine/device_sampling_test.cc builds it):
// a prompt holding each history id once and an output holding it `count` times.
struct HostRow {
  scheduler::SamplingParams params;
  std::vector<int32_t> prompt, output, banned;
  engine::SamplingContext ctx() const {
    engine::SamplingContext c;
    c.params = &params;
    c.prompt = prompt;
    c.output = output;
    c.banned = banned;
    return c;
  }
};

HostRow ToHost(const RowSampling& in) {
  HostRow h;
  h.params.temperature = in.temperature;
  h.params.top_k = in.top_k;
  h.params.top_p = in.top_p;
  h.params.min_p = in.min_p;
  h.params.repetition_penalty = in.repetition_penalty;
  h.params.frequency_penalty = in.frequency_penalty;
  h.params.presence_penalty = in.presence_penalty;
  for (const auto& [id, b] : in.bias) h.params.logit_bias[id] = b;
  for (size_t i = 0; i < in.history_ids.size(); ++i) {
    h.prompt.push_back(in.history_ids[i]);
    h.output.insert(h.output.end(), static_cast<size_t>(in.history_output_counts[i]), in.history_ids[i]);
  }
  h.banned = in.banned;
  return h;
}

// The id the host sampler draws from `logits` (processed here) for `row`, and the kept distribution
// (empty for a greedy row). `ids` maps columns to the ids reported (null: the column).
struct Draw {
  int32_t id = -1;
  std::vector<engine::TokenProb> kept;  // ids mapped, sorted by id
};

Draw DrawOf(std::vector<float> logits, const RowSampling& row, const std::vector<int32_t>* ids) {
  engine::Sampler sampler(static_cast<int32_t>(logits.size()));
  const HostRow h = ToHost(row);
  sampler.ProcessLogits(logits, h.ctx());
  auto map = [&](int32_t c) { return ids != nullptr ? (*ids)[static_cast<size_t>(c)] : c; };
  Draw d;
  if (row.temperature < engine::kGreedyTemperature) {
    d.id = map(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    return d;
  }
  auto kept = sampler.Truncate(logits, h.params);
  EXPECT_TRUE(kept.ok()) << kept.status();
  if (!kept.ok()) return d;
  double cum = 0;
  d.id = map(kept->back().id);
  for (const engine::TokenProb& t : *kept) {
    cum += t.prob;
    if (row.uniform < cum) {
      d.id = map(t.id);
      break;
    }
  }
  for (const engine::TokenProb& t : *kept) d.kept.push_back({map(t.id), t.prob});
  std::sort(d.kept.begin(), d.kept.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return d;
}

// What one rank sends (split_vocab_sampling.h): its slice processed with its restricted lists, its
// best min(CandidatesOf(row), slice) (value, global id) pairs, best first and the lower id first on
// equal values, padded to k with (-inf, -1).
void RankCandidates(const std::vector<float>& logits, const RowSampling& row, Range slice, int32_t k,
                    std::vector<float>* values, std::vector<int32_t>* ids) {
  std::vector<float> part(logits.begin() + slice.first, logits.begin() + slice.second);
  const RowSampling local = RestrictToSlice(row, slice);
  engine::Sampler sampler(static_cast<int32_t>(part.size()));
  const HostRow h = ToHost(local);
  sampler.ProcessLogits(part, h.ctx());
  std::vector<int32_t> order(part.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return part[a] > part[b]; });
  const int32_t n = std::min<int32_t>(std::min(CandidatesOf(row), k), static_cast<int32_t>(part.size()));
  for (int32_t j = 0; j < k; ++j) {
    values->push_back(j < n ? part[static_cast<size_t>(order[j])] : -std::numeric_limits<float>::infinity());
    ids->push_back(j < n ? static_cast<int32_t>(slice.first) + order[j] : -1);
  }
}

RowSampling RandomRow(std::mt19937& rng, int32_t vocab, int kind) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  RowSampling r;
  r.uniform = u(rng);
  switch (kind % 5) {
    case 0: r.temperature = 0.0f; break;                                      // greedy
    case 1: r.temperature = 0.7f; r.top_k = 1 + static_cast<int32_t>(rng() % 8); break;
    case 2: r.temperature = 1.3f; r.top_k = 40; r.top_p = 0.85f; break;
    case 3: r.temperature = 1.0f; r.top_k = 20; r.min_p = 0.08f; break;
    default: r.temperature = 0.9f; r.top_k = 64; r.top_p = 0.6f; r.min_p = 0.02f; break;
  }
  if (kind % 2 == 1) {  // banned ids, logit_bias and penalties over the whole vocabulary
    for (int i = 0; i < 6; ++i) r.banned.push_back(id(rng));
    for (int i = 0; i < 6; ++i) r.bias.emplace_back(id(rng), u(rng) * 4.0f - 2.0f);
    r.repetition_penalty = 1.3f;
    r.frequency_penalty = 0.4f;
    r.presence_penalty = 0.3f;
    std::vector<int32_t> seen;
    for (int i = 0; i < 30; ++i) {
      const int32_t t = id(rng);
      if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      r.history_ids.push_back(t);
      r.history_output_counts.push_back(static_cast<int32_t>(rng() % 3));
    }
  }
  return r;
}

TEST(SplitVocabSampling, CandidateRowsDrawWhatTheWholeRowDraws) {
  std::mt19937 rng(20240607);
  int checked = 0, sampled = 0;
  for (const int32_t vocab : {1000, 997, 64}) {
    for (const int32_t world : {2, 3, 4}) {
      for (int trial = 0; trial < 60; ++trial) {
        SCOPED_TRACE(testing::Message() << "vocab " << vocab << " world " << world << " trial " << trial);
        // Logits on a coarse grid (many exact ties, across slice boundaries too).
        std::vector<float> logits(static_cast<size_t>(vocab));
        std::normal_distribution<float> n(0.0f, 2.0f);
        for (float& v : logits) v = std::round(n(rng) * 4.0f) / 4.0f;
        const RowSampling row = RandomRow(rng, vocab, trial);
        const SplitSamplingPlan plan = PlanSplitSampling(std::span<const RowSampling>(&row, 1), vocab);
        if (!plan.candidates) continue;  // top_k past the vocabulary (the 64-token case): full rows
        std::vector<float> values;
        std::vector<int32_t> ids;
        for (int32_t q = 0; q < world; ++q) {
          RankCandidates(logits, row, ShardPlan{q, world}.Part(vocab), plan.k, &values, &ids);
        }
        const Draw whole = DrawOf(logits, row, nullptr);
        const Draw split = DrawOf(values, ForCandidateRow(row), &ids);
        EXPECT_EQ(split.id, whole.id);
        ASSERT_EQ(split.kept.size(), whole.kept.size());
        for (size_t i = 0; i < whole.kept.size(); ++i) {
          EXPECT_EQ(split.kept[i].id, whole.kept[i].id);
          EXPECT_NEAR(split.kept[i].prob, whole.kept[i].prob, 1e-12);
        }
        ++checked;
        sampled += !whole.kept.empty();
      }
    }
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(sampled, 200);
}

TEST(SplitVocabSampling, PlanTakesCandidatesOnlyWhereTheyHoldTheWholeDistribution) {
  auto plan = [](std::vector<RowSampling> rows, int64_t vocab = 1000) {
    return PlanSplitSampling(rows, vocab);
  };
  RowSampling greedy;
  greedy.temperature = 0.0f;
  RowSampling top_k;
  top_k.top_k = 50;
  RowSampling temperature_only;  // the draw can land on any token
  RowSampling top_p_only;
  top_p_only.top_p = 0.9f;
  RowSampling logprobs = greedy;  // top logprobs need the whole row's normaliser
  logprobs.num_logprobs = 0;
  RowSampling huge_k;
  huge_k.top_k = kMaxSplitCandidates + 1;

  SplitSamplingPlan p = plan({greedy});
  EXPECT_TRUE(p.candidates);
  EXPECT_EQ(p.k, 1);
  p = plan({greedy, top_k, greedy});
  EXPECT_TRUE(p.candidates);
  EXPECT_EQ(p.k, 50);
  EXPECT_FALSE(plan({greedy, temperature_only}).candidates);
  EXPECT_FALSE(plan({top_p_only}).candidates);
  EXPECT_FALSE(plan({logprobs}).candidates);
  EXPECT_FALSE(plan({huge_k}).candidates);
  EXPECT_FALSE(plan({top_k}, 50).candidates);  // top_k >= vocab is off
  p = plan({});
  EXPECT_TRUE(p.candidates);
  EXPECT_EQ(p.k, 0);
  EXPECT_EQ(CandidatesOf(greedy), 1);
  EXPECT_EQ(CandidatesOf(top_k), 50);
}

TEST(SplitVocabSampling, RestrictToSliceKeepsTheSlicesIdsMadeZeroBased) {
  RowSampling row;
  row.temperature = 0.8f;
  row.top_k = 7;
  row.banned = {3, 100, 149, 150, 999};
  row.bias = {{99, 1.5f}, {120, -2.0f}, {150, 3.0f}};
  row.history_ids = {5, 110, 149, 200};
  row.history_output_counts = {1, 2, 0, 4};
  row.mask_row = 2;
  const RowSampling s = RestrictToSlice(row, {100, 150});
  EXPECT_EQ(s.banned, (std::vector<int32_t>{0, 49}));
  EXPECT_EQ(s.bias, (std::vector<std::pair<int32_t, float>>{{20, -2.0f}}));
  EXPECT_EQ(s.history_ids, (std::vector<int32_t>{10, 49}));
  EXPECT_EQ(s.history_output_counts, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(s.temperature, 0.8f);
  EXPECT_EQ(s.top_k, 7);

  const RowSampling c = ForCandidateRow(row);
  EXPECT_TRUE(c.banned.empty() && c.bias.empty() && c.history_ids.empty());
  EXPECT_EQ(c.repetition_penalty, 1.0f);
  EXPECT_EQ(c.frequency_penalty, 0.0f);
  EXPECT_EQ(c.presence_penalty, 0.0f);
  EXPECT_EQ(c.top_k, 7);
  EXPECT_EQ(c.mask_row, -1);  // the ranks applied the mask to their slices
  EXPECT_EQ(c.num_logprobs, -1);
}

}  // namespace
}  // namespace sparkserve::model
