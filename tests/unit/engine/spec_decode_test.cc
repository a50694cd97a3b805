// The parts of speculative decoding without a model: the n-gram drafter, the step cost curve,
// the auto policy's choice of k, and the scheduler's verify windows (plan shape, MTP work, column
// commits, pages of rejected drafts released).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/drafter.h"
#include "engine/spec_decode.h"
#include "engine/step_cost.h"
#include "scheduler/scheduler.h"

namespace sparkserve::engine {
namespace {

TEST(NgramDrafter, ContinuesTheMostRecentEarlierOccurrenceOfTheLongestSuffix) {
  NgramDrafter d(2, 4);
  // Suffix "3 4" occurred at 2..3 (followed by 9 9) and at 6..7 (followed by 5 6): the later wins.
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 9, 3, 4, 5, 6, 7, 3, 4};
  EXPECT_EQ(d.Propose(t, 3), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(d.Propose(t, 1), (std::vector<int32_t>{5}));
  // The longest match wins over a more recent shorter one: "1 2 3" at 0 beats "2 3" at 5.
  const std::vector<int32_t> u = {1, 2, 3, 8, 8, 2, 3, 7, 1, 2, 3};
  EXPECT_EQ(d.Propose(u, 2), (std::vector<int32_t>{8, 8}));
  // The proposal stops at the end of the history; no match of 2+ tokens: nothing.
  EXPECT_EQ(d.Propose(std::vector<int32_t>{5, 6, 5, 6}, 4), (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(d.Propose(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(d.Propose(std::vector<int32_t>{1}, 4).empty());
  EXPECT_TRUE(d.Propose(t, 0).empty());
}

// The definition, one scan per n: the longest suffix of min_n..max_n tokens that occurred before,
// continued from its most recent earlier occurrence.
std::vector<int32_t> NgramByDefinition(const std::vector<int32_t>& t, int32_t min_n, int32_t max_n, int32_t k) {
  const auto L = static_cast<int32_t>(t.size());
  for (int32_t n = std::min(max_n, L - 1); n >= min_n; --n) {
    for (int32_t i = L - n - 1; i >= 0; --i) {
      if (!std::equal(t.end() - n, t.end(), t.begin() + i)) continue;
      return std::vector<int32_t>(t.begin() + i + n, t.begin() + std::min(L, i + n + k));
    }
  }
  return {};
}

TEST(NgramDrafter, EqualsTheDefinitionOnRandomHistories) {
  std::mt19937 rng(7);
  int64_t proposals = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3), max_n = min_n + static_cast<int32_t>(rng() % 4);
    const int32_t alphabet = 2 + static_cast<int32_t>(rng() % 6);  // small: many repeats
    std::vector<int32_t> t(rng() % 40);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet));
    const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
    NgramDrafter d(min_n, max_n);
    const std::vector<int32_t> want = NgramByDefinition(t, min_n, max_n, k);
    ASSERT_EQ(d.Propose(t, k), want) << "trial " << trial;
    proposals += want.empty() ? 0 : 1;
  }
  EXPECT_GT(proposals, 1000);  // the histories exercised matches, not only misses
}

TEST(StepCostCurve, InterpolatesAndExtrapolatesPessimistically) {
  StepCostCurve c;
  EXPECT_DOUBLE_EQ(c.Cost(7), 7.0);  // nothing measured: proportional
  c.Observe(1, 1.0);
  c.Observe(5, 2.0);
  EXPECT_DOUBLE_EQ(c.Cost(1), 1.0);
  EXPECT_DOUBLE_EQ(c.Cost(3), 1.5);
  EXPECT_DOUBLE_EQ(c.Cost(10), 4.0);  // beyond the largest: in proportion
  c.Observe(5, 3.0);                  // moves a fifth of the way
  EXPECT_DOUBLE_EQ(c.Cost(5), 2.2);
  EXPECT_EQ(StepCostCounts(12), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 12}));
}

struct PolicyFixture {
  std::vector<std::unique_ptr<scheduler::Sequence>> seqs;
  std::vector<scheduler::SpecCandidate> Candidates(int n, int32_t max_drafts) {
    std::vector<scheduler::SpecCandidate> out;
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<scheduler::Sequence>();
      s->id = static_cast<scheduler::SeqId>(seqs.size() + 1);
      s->tokens = {1, 2, 3};
      out.push_back({s.get(), max_drafts, true});
      seqs.push_back(std::move(s));
    }
    return out;
  }
};

SpecConfig Auto(int32_t k) {
  SpecConfig c;
  c.mode = SpecMode::kMtp;
  c.max_drafts = k;
  c.policy = SpecPolicy::kAuto;
  return c;
}

TEST(SpecDecoderAuto, DraftsWhenStepsAreFlatNotWhenTheyAreProportional) {
  PolicyFixture f;
  SpecDecoder flat(Auto(4), std::make_unique<MtpDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) flat.cost_curve().Observe(t, 1.0 + 0.001 * t);  // memory-bound decode
  auto c = f.Candidates(4, 4);
  flat.Plan(c, 4, 100);
  for (const auto& x : c) EXPECT_GE(x.num_drafts, 1);

  SpecDecoder linear(Auto(4), std::make_unique<MtpDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) linear.cost_curve().Observe(t, 1.0 * t);  // compute-bound: a token costs a token
  auto d = f.Candidates(4, 4);
  linear.Plan(d, 4, 100);
  for (const auto& x : d) EXPECT_EQ(x.num_drafts, 0);
}

TEST(SpecDecoderAuto, KFollowsAcceptanceAndMtpWorkStopsWhenIdle) {
  PolicyFixture f;
  SpecDecoder p(Auto(6), std::make_unique<MtpDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) p.cost_curve().Observe(t, 1.0 + 0.05 * t);
  auto c = f.Candidates(2, 6);
  // Sequence 1 accepts everything, sequence 2 nothing.
  for (int i = 0; i < 40; ++i) {
    p.Record(c[0].seq->id, 6, 6);
    p.Record(c[1].seq->id, 6, 0);
  }
  p.Plan(c, 2, 100);
  EXPECT_EQ(c[0].num_drafts, 6);
  EXPECT_EQ(c[1].num_drafts, 0);
  EXPECT_EQ(p.counters().num_drafts, 80);
  EXPECT_EQ(p.counters().num_draft_tokens, 480);
  EXPECT_EQ(p.counters().num_accepted_tokens, 240);
  EXPECT_EQ(p.counters().accepted_per_pos, (std::vector<int64_t>(6, 40)));
  EXPECT_TRUE(c[1].seq->mtp_off);  // its first drafts never held: its MTP work stops
  EXPECT_FALSE(c[0].seq->mtp_off);
}

TEST(SpecDecoderAuto, AnMtpSequenceLeftIdleWhileThePoolAcceptsNothingStopsItsMtpWork) {
  PolicyFixture f;
  SpecDecoder p(Auto(3), std::make_unique<MtpDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) p.cost_curve().Observe(t, 1.0 + 0.05 * t);
  auto old = f.Candidates(1, 3);
  for (int i = 0; i < 20; ++i) p.Record(old[0].seq->id, 3, 0);  // the pool: first drafts never hold
  auto c = f.Candidates(1, 3);
  int steps = 0;
  while (!c[0].seq->mtp_off && steps < 100) {
    c[0].num_drafts = 0;
    p.Plan(c, 1, 100);
    EXPECT_EQ(c[0].num_drafts, 0) << "step " << steps;  // never worth drafting by the estimate
    ++steps;
  }
  EXPECT_TRUE(c[0].seq->mtp_off);
  EXPECT_EQ(steps, 16);  // kIdleSteps: then its MTP KV fill stops
  // While the pool accepts, an idle sequence keeps its MTP work (a probe may show it pays).
  PolicyFixture g;
  SpecDecoder q(Auto(3), std::make_unique<MtpDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) q.cost_curve().Observe(t, 1.0 * t);  // drafting never pays by the estimate
  auto good = g.Candidates(1, 3);
  for (int i = 0; i < 20; ++i) q.Record(good[0].seq->id, 3, 3);
  auto d = g.Candidates(1, 3);
  for (int step = 0; step < 40; ++step) {
    d[0].num_drafts = 0;
    q.Plan(d, 1, 100);
  }
  EXPECT_FALSE(d[0].seq->mtp_off);
}

TEST(SpecDecoderAuto, ProbesASequenceThatStoppedDraftingInOneStepOfSixteen) {
  PolicyFixture f;
  SpecConfig cfg = Auto(3);
  cfg.mode = SpecMode::kNgram;
  SpecDecoder p(cfg, std::make_unique<NgramDrafter>(), [](const scheduler::Sequence&) { return true; });
  for (int t = 1; t <= 64; ++t) p.cost_curve().Observe(t, 1.0 * t);  // drafting never pays by the estimate
  auto c = f.Candidates(1, 3);
  c[0].seq->tokens = {1, 2, 3, 4, 1, 2};
  std::vector<int> drafted_at;
  for (int step = 1; step <= 48; ++step) {
    c[0].num_drafts = 0;
    p.Plan(c, 1, 100);
    if (c[0].num_drafts > 0) {
      EXPECT_EQ(c[0].num_drafts, 3);  // the whole proposal: every position learns
      drafted_at.push_back(step);
    }
  }
  EXPECT_EQ(drafted_at, (std::vector<int>{16, 32, 48}));
}

TEST(SpecDecoderFixed, DraftsTheProposalAndNeverForConstrainedSequences) {
  PolicyFixture f;
  SpecConfig cfg;
  cfg.mode = SpecMode::kNgram;
  cfg.max_drafts = 3;
  cfg.policy = SpecPolicy::kFixed;
  SpecDecoder p(cfg, std::make_unique<NgramDrafter>(), [](const scheduler::Sequence& s) { return s.id != 2; });
  auto c = f.Candidates(2, 5);
  c[0].seq->tokens = {1, 2, 3, 4, 5, 6, 1, 2};
  c[1].seq->tokens = {1, 2, 3, 4, 5, 6, 1, 2};
  p.Plan(c, 2, 100);
  EXPECT_EQ(c[0].num_drafts, 3);
  EXPECT_EQ(c[0].drafts, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(c[1].num_drafts, 0);
}

// A planner that asks every candidate for `k` drafts of token 9.
class FixedPlanner : public scheduler::DraftPlanner {
 public:
  explicit FixedPlanner(int32_t k) : k_(k) {}
  void Plan(std::vector<scheduler::SpecCandidate>& candidates, int64_t, int32_t) override {
    for (auto& c : candidates) {
      c.num_drafts = k_;
      c.drafts.assign(static_cast<size_t>(k_), 9);
    }
  }

 private:
  int32_t k_;
};

TEST(SchedulerSpec, VerifyWindowCommitsAcceptedColumnsAndReleasesRejectedPages) {
  model::ModelCapacity cap{1, 8, 4, 64, 64, 5};
  auto s = scheduler::Scheduler::Create({.max_step_tokens = 64}, cap);
  ASSERT_TRUE(s.ok());
  FixedPlanner planner(4);
  (*s)->EnableSpeculation(4, /*mtp=*/false, &planner);
  scheduler::Sequence* seq = (*s)->Add(1, 0, {1, 2, 3}, 20);
  auto b0 = (*s)->Schedule();  // the prompt
  ASSERT_EQ(b0.plan.seqs.size(), 1u);
  EXPECT_FALSE(b0.plan.seqs[0].keep_column_states);
  (*s)->CommitStep(b0);
  (*s)->AppendToken(seq, 7);
  auto b1 = (*s)->Schedule();  // a verify window: 7 then the 4 drafts, positions 3..7
  ASSERT_EQ(b1.plan.seqs.size(), 1u);
  const model::SeqWork& w = b1.plan.seqs[0];
  EXPECT_EQ(w.start_pos, 3);
  EXPECT_EQ(w.tokens, (std::vector<int32_t>{7, 9, 9, 9, 9}));
  EXPECT_TRUE(w.keep_column_states);
  EXPECT_EQ(w.logits, model::LogitsWanted::kAll);
  EXPECT_EQ(w.kv_pages.size(), 2u);  // 8 positions
  EXPECT_EQ(b1.num_draft_tokens, 4);
  EXPECT_TRUE(b1.plan.commits.empty());
  const int32_t free_before = (*s)->num_free_pages();
  (*s)->CommitStep(b1);
  EXPECT_EQ(seq->num_computed, 3);  // waits for AcceptDrafts
  (*s)->AppendToken(seq, 8);        // no draft held: column 0's token
  (*s)->AcceptDrafts(seq, 0);
  EXPECT_EQ(seq->num_computed, 4);
  EXPECT_EQ((*s)->num_free_pages(), free_before + 1);  // positions 4..7 were only drafts
  auto b2 = (*s)->Schedule();
  ASSERT_EQ(b2.plan.commits.size(), 1u);
  EXPECT_EQ(b2.plan.commits[0].slot, seq->slot);
  EXPECT_EQ(b2.plan.commits[0].accepted, 1);
  EXPECT_EQ(b2.plan.seqs[0].start_pos, 4);
  EXPECT_EQ(b2.plan.seqs[0].tokens.front(), 8);
}

TEST(SchedulerSpec, MtpWorkFollowsEveryForwardAndDraftsForTheVerifyWindow) {
  model::ModelCapacity cap{2, 16, 4, 64, 64, 4};
  auto s = scheduler::Scheduler::Create({.max_step_tokens = 64, .prefill_chunk = 4}, cap);
  ASSERT_TRUE(s.ok());
  FixedPlanner planner(3);
  (*s)->EnableSpeculation(3, /*mtp=*/true, &planner);
  scheduler::Sequence* seq = (*s)->Add(1, 0, {1, 2, 3, 4, 5, 6}, 20);
  auto b0 = (*s)->Schedule();  // chunk 0..3
  EXPECT_TRUE(b0.plan.drafts.empty());
  (*s)->CommitStep(b0);
  auto b1 = (*s)->Schedule();  // chunk 4..5; MTP over positions 0..3 with tokens 1..4
  ASSERT_EQ(b1.plan.drafts.size(), 1u);
  EXPECT_EQ(b1.plan.drafts[0].start_pos, 0);
  EXPECT_EQ(b1.plan.drafts[0].tokens, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(b1.plan.drafts[0].hidden_row, 0);
  EXPECT_EQ(b1.plan.drafts[0].num_drafts, 0);
  (*s)->CommitStep(b1);
  (*s)->AppendToken(seq, 40);
  auto b2 = (*s)->Schedule();  // MTP over 4..5 (tokens 6, 40) drafts 3; the forward verifies them
  ASSERT_EQ(b2.plan.drafts.size(), 1u);
  EXPECT_EQ(b2.plan.drafts[0].start_pos, 4);
  EXPECT_EQ(b2.plan.drafts[0].tokens, (std::vector<int32_t>{6, 40}));
  EXPECT_EQ(b2.plan.drafts[0].num_drafts, 3);
  ASSERT_EQ(b2.plan.seqs.size(), 1u);
  EXPECT_EQ(b2.plan.seqs[0].tokens, (std::vector<int32_t>{40}));
  EXPECT_EQ(b2.plan.seqs[0].num_drafts, 3);
  (*s)->CommitStep(b2);
  (*s)->AppendToken(seq, 41);
  (*s)->AppendToken(seq, 42);
  (*s)->AcceptDrafts(seq, 1);  // draft 41 held; 42 from column 1
  auto b3 = (*s)->Schedule();  // MTP over the 2 accepted columns, positions 6..7
  ASSERT_EQ(b3.plan.drafts.size(), 1u);
  EXPECT_EQ(b3.plan.drafts[0].start_pos, 6);
  EXPECT_EQ(b3.plan.drafts[0].tokens, (std::vector<int32_t>{41, 42}));
  EXPECT_EQ(b3.plan.drafts[0].hidden_row, 0);
  ASSERT_EQ(b3.plan.commits.size(), 1u);
  EXPECT_EQ(b3.plan.commits[0].accepted, 2);
  EXPECT_EQ(b3.plan.seqs[0].start_pos, 8);
}

}  // namespace
}  // namespace sparkserve::engine
