// CpuModelRunner against the Hugging Face fixtures (tests/golden/qwen35): full-prefill logits,
// greedy continuation, MTP prompt pass and drafts, for every configuration.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"
#include "tests/unit/model/golden_fixture.h"

namespace sparkserve::model {
namespace {

using namespace testing;  // NOLINT

class Golden35 : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden35, PrefillLogitsMatchTransformers) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const int32_t T = static_cast<int32_t>(g.ids.size());
  StepPlan plan;
  plan.seqs.push_back(Seq(0, 0, g.ids, Pages(0, 8)));
  auto out = r->Run(plan);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->logits.numel(), static_cast<int64_t>(g.logits.size()));
  const double err = RelErr(out->logits.data<float>(), g.logits.data(), g.logits.size());
  EXPECT_LE(err, 1e-4);
  RecordProperty("rel_err", std::to_string(err));
  // The hidden handed to MTP is the lm_head input (after the final norm).
  ASSERT_EQ(out->hidden.numel(), static_cast<int64_t>(g.hidden.size()));
  EXPECT_LE(RelErr(out->hidden.data<float>(), g.hidden.data(), g.hidden.size()), 1e-4);
  EXPECT_EQ(out->logit_row_begin, (std::vector<int32_t>{0, T}));
}

TEST_P(Golden35, GreedyContinuationMatchesTransformers) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const int64_t V = r->config().vocab_size;
  StepPlan plan;
  plan.seqs.push_back(Seq(0, 0, g.ids, Pages(0, 10), LogitsWanted::kLast));
  std::vector<int32_t> got;
  int32_t pos = static_cast<int32_t>(g.ids.size());
  for (size_t i = 0; i < g.greedy.size(); ++i) {
    auto out = r->Run(plan);
    ASSERT_TRUE(out.ok()) << out.status();
    const int32_t next = kernels::cpu::Argmax(out->logits.data<float>(), V);
    got.push_back(next);
    plan.seqs[0] = Seq(0, pos++, {next}, Pages(0, 10), LogitsWanted::kLast);
  }
  EXPECT_EQ(got, g.greedy);
}

TEST_P(Golden35, MtpPromptPassAndDraftsMatchReference) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->has_mtp());
  const int64_t V = r->config().vocab_size, d = r->config().hidden_size;
  const int32_t T = static_cast<int32_t>(g.ids.size());
  StepPlan plan;
  plan.seqs.push_back(Seq(1, 0, g.ids, Pages(8, 8)));
  auto out = r->Run(plan);
  ASSERT_TRUE(out.ok()) << out.status();
  // One DraftWork: the MTP over the prompt (position p takes ids[p+1] and the target's hidden at p,
  // the previous step's rows), its last position taking the target's greedy token, then K drafts.
  const int32_t k = static_cast<int32_t>(g.draft_tokens.size());
  StepPlan mtp;
  DraftWork& w = mtp.drafts.emplace_back();
  w.slot = 1;
  w.start_pos = 0;
  w.tokens.assign(g.ids.begin() + 1, g.ids.end());
  w.tokens.push_back(g.greedy[0]);
  w.hidden_row = 0;
  w.num_drafts = k;
  w.kv_pages = Pages(8, 8);
  w.logits = LogitsWanted::kAll;
  auto m = r->Run(mtp);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->drafts.size(), 1u);
  EXPECT_EQ(m->drafts[0], g.draft_tokens);
  // Rows: T teacher-forced positions (the last is draft step 0), then K - 1 more draft steps.
  ASSERT_EQ(m->draft_logits.numel(), (T + k - 1) * V);
  const float* rows = m->draft_logits.data<float>();
  ASSERT_EQ(static_cast<int64_t>(g.mtp_logits.size()), (T - 1) * V);
  EXPECT_LE(RelErr(rows, g.mtp_logits.data(), g.mtp_logits.size()), 1e-4);
  EXPECT_LE(RelErr(rows + (T - 1) * V, g.draft_logits.data(), g.draft_logits.size()), 1e-4);
  EXPECT_EQ(static_cast<int64_t>(g.draft_logits.size()), k * V);
  (void)d;
  (void)out;
}

// --draft-vocab N: each draft is the argmax of its MTP logits row among ids [0, N) (the logits
// themselves stay whole rows), with N just above the smallest of the reference's drafts so that the
// restriction matters for the others.
TEST_P(Golden35, DraftVocabularyRestrictsDraftsToTheLowIds) {
  const Golden g = LoadGolden(GetParam());
  ASSERT_FALSE(g.draft_tokens.empty());
  const int32_t smallest = *std::min_element(g.draft_tokens.begin(), g.draft_tokens.end());
  CpuRunnerOptions o = SmallOptions();
  o.draft_vocab = std::max(2, smallest + 1);
  auto r = Load(GetParam(), o);
  ASSERT_NE(r, nullptr);
  const int64_t V = r->config().vocab_size;
  ASSERT_LT(o.draft_vocab, V);
  StepPlan plan;
  plan.seqs.push_back(Seq(1, 0, g.ids, Pages(8, 8)));
  ASSERT_TRUE(r->Run(plan).ok());
  StepPlan mtp;
  DraftWork& w = mtp.drafts.emplace_back();
  w.slot = 1;
  w.tokens.assign(g.ids.begin() + 1, g.ids.end());
  w.tokens.push_back(g.greedy[0]);
  w.num_drafts = static_cast<int32_t>(g.draft_tokens.size());
  w.kv_pages = Pages(8, 8);
  w.logits = LogitsWanted::kAll;
  auto m = r->Run(mtp);
  ASSERT_TRUE(m.ok()) << m.status();
  const int64_t T = static_cast<int64_t>(w.tokens.size());
  ASSERT_EQ(m->drafts[0].size(), g.draft_tokens.size());
  for (size_t j = 0; j < m->drafts[0].size(); ++j) {
    const float* row = m->draft_logits.data<float>() + (T - 1 + static_cast<int64_t>(j)) * V;
    EXPECT_EQ(m->drafts[0][j], kernels::cpu::Argmax(row, o.draft_vocab)) << j;
    EXPECT_LT(m->drafts[0][j], o.draft_vocab) << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, Golden35, ::testing::ValuesIn(kConfigs));

}  // namespace
}  // namespace sparkserve::model
