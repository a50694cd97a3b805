// CpuModelRunner invariants: chunked / token-by-token prefill, ragged batches, one weight pass per
// step, tensor-parallel shard plans in-process, MTP verify + commit and drafts as plan operations,
// and bad-input errors.
#include <cmath>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"
#include "core/status.h"
#include "head/demo/demo_model.h"
#include "model/checkpoint_weight_source.h"
#include "model/shard_cuts.h"
#include "tests/unit/model/golden_fixture.h"

namespace sparkserve::model {
namespace {

using namespace testing;  // NOLINT

// Logits of every prompt position, prefilling in the given chunk sizes.
std::vector<float> PrefillInChunks(CpuModelRunner& r, SlotId slot, const std::vector<int32_t>& ids,
                                   const std::vector<int>& chunks, std::vector<int32_t> pages) {
  std::vector<float> all;
  int32_t pos = 0;
  for (int c : chunks) {
    StepPlan plan;
    plan.seqs.push_back(Seq(slot, pos, {ids.begin() + pos, ids.begin() + pos + c}, pages));
    auto out = r.Run(plan);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    all.insert(all.end(), out->logits.data<float>(), out->logits.data<float>() + out->logits.numel());
    pos += c;
  }
  EXPECT_EQ(pos, static_cast<int32_t>(ids.size()));
  return all;
}

class Runner35 : public ::testing::TestWithParam<const char*> {};

TEST_P(Runner35, ChunkedAndTokenByTokenPrefillAgree) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const std::vector<float> whole = PrefillInChunks(*r, 0, g.ids, {21}, Pages(0, 6));
  const std::vector<float> uneven = PrefillInChunks(*r, 1, g.ids, {5, 1, 11, 4}, Pages(6, 6));
  const std::vector<float> single = PrefillInChunks(*r, 2, g.ids, std::vector<int>(21, 1), Pages(12, 6));
  ASSERT_EQ(whole.size(), g.logits.size());
  ASSERT_EQ(uneven.size(), whole.size());
  ASSERT_EQ(single.size(), whole.size());
  EXPECT_LE(MaxAbsDiff(uneven.data(), whole.data(), whole.size()), 1e-5);
  EXPECT_LE(MaxAbsDiff(single.data(), whole.data(), whole.size()), 1e-5);
}

TEST_P(Runner35, RaggedBatchGivesEachSequenceItsAloneLogits) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const std::vector<int32_t> a(g.ids.begin(), g.ids.begin() + 9);   // slot 0: prefilled 6, then 3 more
  const std::vector<int32_t> b(g.ids.begin() + 3, g.ids.end());    // slot 1: prefilled 17, then 1 decode
  const std::vector<int32_t> c(g.ids.begin() + 5, g.ids.begin() + 12);  // slot 2: new, 7-token prefill
  const std::vector<int32_t> pa = Pages(0, 4), pb = Pages(4, 6), pc = Pages(10, 4);
  // Alone.
  auto alone_a = PrefillInChunks(*r, 0, a, {6, 3}, pa);
  auto alone_b = PrefillInChunks(*r, 1, b, {17, 1}, pb);
  auto alone_c = PrefillInChunks(*r, 2, c, {7}, pc);
  // Batched: the history first, then one step mixing all three at different positions.
  PrefillInChunks(*r, 3, {a.begin(), a.begin() + 6}, {6}, Pages(14, 4));
  std::vector<int32_t> b17(b.begin(), b.begin() + 17);
  PrefillInChunks(*r, 4, b17, {17}, Pages(18, 6));
  StepPlan plan;
  plan.seqs.push_back(Seq(4, 17, {b[17]}, Pages(18, 6)));
  plan.seqs.push_back(Seq(5, 0, c, Pages(24, 4)));
  plan.seqs.push_back(Seq(3, 6, {a.begin() + 6, a.end()}, Pages(14, 4)));
  auto out = r->Run(plan);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t V = r->config().vocab_size;
  EXPECT_EQ(out->logit_row_begin, (std::vector<int32_t>{0, 1, 8, 11}));
  const float* L = out->logits.data<float>();
  EXPECT_LE(MaxAbsDiff(L, alone_b.data() + 17 * V, V), 1e-6);
  EXPECT_LE(MaxAbsDiff(L + 1 * V, alone_c.data(), 7 * V), 1e-6);
  EXPECT_LE(MaxAbsDiff(L + 8 * V, alone_a.data() + 6 * V, 3 * V), 1e-6);
}

TEST_P(Runner35, EveryLinearReadsItsWeightsOncePerStep) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const auto& c = r->config();
  int64_t expected = 1;  // lm_head
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) expected += 3 + (c.is_full_attention(i) ? 4 : 5);
  auto passes = [&](const StepPlan& plan) {
    const int64_t before = kernels::cpu::LinearPassCount();
    EXPECT_TRUE(r->Run(plan).ok());
    return kernels::cpu::LinearPassCount() - before;
  };
  StepPlan one;
  one.seqs.push_back(Seq(0, 0, {g.ids.begin(), g.ids.begin() + 4}, Pages(0, 4), LogitsWanted::kLast));
  EXPECT_EQ(passes(one), expected);
  StepPlan three;
  three.seqs.push_back(Seq(0, 4, {g.ids[4]}, Pages(0, 4)));
  three.seqs.push_back(Seq(1, 0, {g.ids.begin(), g.ids.begin() + 9}, Pages(4, 4)));
  three.seqs.push_back(Seq(2, 0, {g.ids.begin() + 2, g.ids.begin() + 5}, Pages(8, 4), LogitsWanted::kNone));
  EXPECT_EQ(passes(three), expected);
}

// After a verify forward of 1+k columns and a ColumnCommit of `accepted` in the next plan, the slot's
// GDN/conv state, and the logits of the next step, equal plain decoding of the accepted tokens.
TEST_P(Runner35, VerifyThenCommitEqualsPlainDecodingAtEveryRejectionPoint) {
  const Golden g = LoadGolden(GetParam());
  auto r = Load(GetParam());
  ASSERT_NE(r, nullptr);
  const int32_t T = static_cast<int32_t>(g.ids.size());
  const std::vector<int32_t> cols = {g.greedy[0], g.draft_tokens[0], g.draft_tokens[1], g.draft_tokens[2]};
  const int64_t V = r->config().vocab_size;
  for (int32_t accepted = 1; accepted <= static_cast<int32_t>(cols.size()); ++accepted) {
    SCOPED_TRACE(accepted);
    const std::vector<int32_t> pv = Pages(0, 8), pd = Pages(8, 8);
    PrefillInChunks(*r, 0, g.ids, {T}, pv);
    PrefillInChunks(*r, 1, g.ids, {T}, pd);
    StepPlan verify;
    verify.seqs.push_back(Seq(0, T, cols, pv));
    verify.seqs.back().keep_column_states = true;
    auto vout = r->Run(verify);
    ASSERT_TRUE(vout.ok()) << vout.status();
    StepPlan commit;
    commit.commits = {{0, accepted}};
    ASSERT_TRUE(r->Run(commit).ok());
    std::vector<float> plain_logits;
    for (int32_t i = 0; i < accepted; ++i) {
      StepPlan step;
      step.seqs.push_back(Seq(1, T + i, {cols[static_cast<size_t>(i)]}, pd));
      auto o = r->Run(step);
      ASSERT_TRUE(o.ok());
      plain_logits.insert(plain_logits.end(), o->logits.data<float>(), o->logits.data<float>() + V);
    }
    // The verify's logits for the accepted columns equal plain decoding's.
    EXPECT_LE(MaxAbsDiff(vout->logits.data<float>(), plain_logits.data(), plain_logits.size()), 1e-5);
    auto& st = r->state();
    for (int32_t i = 0; i < st.num_gdn_layers(); ++i) {
      EXPECT_LE(MaxAbsDiff(st.recurrent(i, 0), st.recurrent(i, 1), st.recurrent_size()), 1e-6);
      EXPECT_LE(MaxAbsDiff(st.conv(i, 0), st.conv(i, 1), st.conv_size()), 1e-6);
    }
    // The next step from both slots (KV past the accepted length is simply overwritten).
    StepPlan next0, next1;
    next0.seqs.push_back(Seq(0, T + accepted, {g.ids[3]}, pv));
    next1.seqs.push_back(Seq(1, T + accepted, {g.ids[3]}, pd));
    auto n0 = r->Run(next0);
    auto n1 = r->Run(next1);
    ASSERT_TRUE(n0.ok() && n1.ok());
    EXPECT_LE(MaxAbsDiff(n0->logits.data<float>(), n1->logits.data<float>(), V), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, Runner35, ::testing::ValuesIn(kConfigs));

// Builds rank `rank` of `world`'s runner over `collective`.
using RankLoader = std::function<absl::StatusOr<std::unique_ptr<CpuModelRunner>>(int32_t rank, int32_t world,
                                                                                 core::Collective* collective)>;

// N ranks on N threads with an in-process collective; returns rank 0's logits of a prefill of
// `ids` (at least 9) beside a second sequence, then a ragged decode + MTP draft step (when the model
// has an MTP block).
std::vector<float> RunTensorParallel(const RankLoader& load, int32_t world, const std::vector<int32_t>& ids,
                                     int32_t next) {
  core::InProcessGroup group(world);
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int32_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto r = load(rank, world, &group.rank(rank));
      ASSERT_TRUE(r.ok()) << r.status();
      auto& runner = **r;
      std::vector<float>& res = results[static_cast<size_t>(rank)];
      StepPlan p1;
      p1.seqs.push_back(Seq(0, 0, ids, Pages(0, 8)));
      p1.seqs.push_back(Seq(1, 0, {ids.begin(), ids.begin() + 5}, Pages(8, 4)));
      auto o1 = runner.Run(p1);
      ASSERT_TRUE(o1.ok()) << o1.status();
      res.insert(res.end(), o1->logits.data<float>(), o1->logits.data<float>() + o1->logits.numel());
      StepPlan p2;
      p2.seqs.push_back(Seq(1, 5, {ids[7], ids[8]}, Pages(8, 4)));
      p2.seqs.push_back(Seq(0, static_cast<int32_t>(ids.size()), {next}, Pages(0, 8)));
      auto o2 = runner.Run(p2);
      ASSERT_TRUE(o2.ok()) << o2.status();
      res.insert(res.end(), o2->logits.data<float>(), o2->logits.data<float>() + o2->logits.numel());
      if (!runner.has_mtp()) return;
      // Two MTP drafts for slot 0 from its last position, whose target hidden is row 2 of p2.
      StepPlan p3;
      DraftWork& dw = p3.drafts.emplace_back();
      dw.slot = 0;
      dw.start_pos = static_cast<int32_t>(ids.size());
      dw.tokens = {7};
      dw.hidden_row = 2;
      dw.num_drafts = 2;
      dw.kv_pages = Pages(0, 8);
      dw.logits = LogitsWanted::kAll;
      auto dr = runner.Run(p3);
      ASSERT_TRUE(dr.ok()) << dr.status();
      ASSERT_EQ(dr->draft_logits.dim(0), 2);
      res.insert(res.end(), dr->draft_logits.data<float>(), dr->draft_logits.data<float>() + dr->draft_logits.numel());
    });
  }
  for (auto& t : threads) t.join();
  for (int32_t rank = 1; rank < world; ++rank) EXPECT_EQ(results[static_cast<size_t>(rank)], results[0]);
  return results[0];
}

RankLoader FromDir(const std::string& dir) {
  return [dir](int32_t rank, int32_t world, core::Collective* c) { return LoadCpuModel(dir, SmallOptions(), rank, world, c); };
}

// max |a - b| / max |b|
double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return den > 0 ? num / den : num;
}

void ExpectRanksEqualOne(const RankLoader& load, const std::vector<int32_t>& worlds, const std::vector<int32_t>& ids,
                         int32_t next) {
  const std::vector<float> one = RunTensorParallel(load, 1, ids, next);
  ASSERT_FALSE(one.empty());
  for (int32_t world : worlds) {
    SCOPED_TRACE(world);
    const std::vector<float> many = RunTensorParallel(load, world, ids, next);
    ASSERT_EQ(many.size(), one.size());
    EXPECT_LE(RelDiff(many, one), 1e-5);
  }
}

TEST(CpuModelTensorParallel, TwoAndFourRanksEqualOneRank) {
  for (const auto& [name, worlds] : std::vector<std::pair<std::string, std::vector<int32_t>>>{
           {"text_tied", {2}}, {"vl_tied", {2, 4}}}) {
    SCOPED_TRACE(name);
    const Golden g = LoadGolden(name);
    ExpectRanksEqualOne(FromDir(GoldenDir(name)), worlds, g.ids, g.greedy[0]);
  }
}

// The shards of quantised checkpoints are cut on the packed layout (NVFP4 codes and group scales,
// FP8 weights with per-channel scales): two ranks give the one rank's logits.
TEST(CpuModelTensorParallel, QuantisedDemoModelsCutOnTheirPackedLayout) {
  for (const char* recipe : {"nvfp4-mixed", "fp8", "nvfp4"}) {
    SCOPED_TRACE(recipe);
    const std::string dir = ::testing::TempDir() + "/tp_demo_" + recipe;
    std::filesystem::remove_all(dir);
    head::DemoModelOptions o;
    o.shape = "tiny";
    o.recipe = recipe;
    auto written = head::WriteDemoModel(dir, o);
    ASSERT_TRUE(written.ok()) << written.status();
    ExpectRanksEqualOne(FromDir(dir), {2}, {5, 9, 200, 13, 44, 87, 3, 120, 61, 7, 33, 250}, 17);
    std::filesystem::remove_all(dir);
  }
}

// More ranks than KV heads: each KV head is replicated on the ranks whose query heads use it (as
// vLLM does): text_tied's weights with its two KV heads cut to one, on two ranks.
TEST(CpuModelTensorParallel, KvHeadsAreReplicatedPastTheirCount) {
  auto full = quant::Checkpoint::Open(GoldenDir("text_tied"));
  ASSERT_TRUE(full.ok()) << full.status();
  auto cfg = LoadQwen35Config(GoldenDir("text_tied"));
  ASSERT_TRUE(cfg.ok());
  Qwen35Config config = *cfg;
  config.num_key_value_heads = 1;
  std::map<std::string, core::Tensor, std::less<>> tensors = full->tensors();
  for (auto& [name, t] : tensors) {
    if (name.find("k_proj.weight") != std::string::npos || name.find("v_proj.weight") != std::string::npos) {
      t = t.Slice(0, config.head_dim);  // the first KV head's rows
    }
  }
  auto one_kv = quant::Checkpoint::FromTensors(std::move(tensors), full->quantization_config(), "text_tied, 1 KV head");
  ASSERT_TRUE(one_kv.ok()) << one_kv.status();
  const RankLoader load = [&](int32_t rank, int32_t world,
                              core::Collective* c) -> absl::StatusOr<std::unique_ptr<CpuModelRunner>> {
    ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Make(rank, world, config));
    EXPECT_EQ(RankShapes::Of(config, plan).kv_heads, 1);
    ASSIGN_OR_RETURN(quant::Checkpoint shard, CutShard(*one_kv, config, plan));
    return LoadCpuModel(std::move(shard), config, plan, c, SmallOptions());
  };
  const Golden g = LoadGolden("text_tied");
  ExpectRanksEqualOne(load, {2}, g.ids, g.greedy[0]);
}

TEST(CpuModelShardPlan, RefusesSizesThatDoNotDivide) {
  auto r = LoadCpuModel(GoldenDir("text_untied"), SmallOptions(), 0, 2, nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("does not divide"), std::string::npos);
  auto bad_rank = LoadCpuModel(GoldenDir("text_tied"), SmallOptions(), 2, 2, nullptr);
  EXPECT_FALSE(bad_rank.ok());
}

TEST(CpuModelErrors, BadStepsAreRefusedBeforeTouchingState) {
  auto r = Load("text_tied");
  ASSERT_NE(r, nullptr);
  auto code = [&](const StepPlan& p) { return r->Run(p).status().code(); };
  StepPlan p;
  p.seqs.push_back(Seq(0, 0, {1, 2, 9999}, Pages(0, 2)));
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // token outside the vocab
  p.seqs[0] = Seq(17, 0, {1}, Pages(0, 2));
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // slot out of range
  p.seqs[0] = Seq(0, 0, {1, 2, 3, 4, 5}, Pages(0, 1));
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // pages do not cover the positions
  p.seqs[0] = Seq(0, 0, {}, Pages(0, 1));
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // no tokens
  p.seqs[0] = Seq(0, 0, {1}, Pages(0, 1));
  p.seqs.push_back(Seq(0, 0, {2}, Pages(1, 1)));
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // slot twice
  p.seqs = {Seq(0, 0, {1}, {99})};
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // page id outside the pool
  p.seqs = {Seq(0, 60, {1, 2, 3, 4, 5}, Pages(0, 20))};
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // past max_seq_len
  p.seqs = {Seq(0, 0, {1, 2, 3, 4, 5, 6, 7}, Pages(0, 2))};
  p.seqs[0].keep_column_states = true;
  EXPECT_EQ(code(p), absl::StatusCode::kInvalidArgument);  // verify wider than max_verify_tokens
  // Commit without a pending verify, and out-of-range acceptance.
  auto commit = [&](SlotId slot, int32_t accepted) {
    StepPlan c;
    c.commits = {{slot, accepted}};
    return code(c);
  };
  EXPECT_EQ(commit(0, 1), absl::StatusCode::kFailedPrecondition);
  p.seqs = {Seq(0, 0, {1, 2, 3}, Pages(0, 1))};
  p.seqs[0].keep_column_states = true;
  ASSERT_TRUE(r->Run(p).ok());
  EXPECT_EQ(commit(0, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(commit(0, 4), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(commit(0, 2), absl::StatusCode::kOk);
  StepPlan copy;
  copy.copies = {{0, 99}};
  EXPECT_EQ(code(copy), absl::StatusCode::kInvalidArgument);  // slot out of range
  copy.copies = {{1, 1}};
  EXPECT_EQ(code(copy), absl::StatusCode::kInvalidArgument);  // onto itself
  // Drafts: the hidden rows must be ones the last forward left; a verify's drafts must be drafted.
  StepPlan draft;
  DraftWork& dw = draft.drafts.emplace_back();
  dw.slot = 0;
  dw.start_pos = 3;
  dw.tokens = {5};
  dw.hidden_row = 3;  // the last forward had 3 rows
  dw.kv_pages = Pages(0, 1);
  EXPECT_EQ(code(draft), absl::StatusCode::kInvalidArgument);
  StepPlan verify;
  verify.seqs = {Seq(0, 3, {5}, Pages(0, 1))};
  verify.seqs[0].num_drafts = 2;
  EXPECT_EQ(code(verify), absl::StatusCode::kInvalidArgument);
}

TEST(CpuModelLoad, MissingOrMisshapenWeightsAreNamed) {
  auto cfg = LoadQwen35Config(GoldenDir("text_tied"));
  ASSERT_TRUE(cfg.ok());
  auto plan = ShardPlan::Make(0, 1, *cfg);
  ASSERT_TRUE(plan.ok());
  std::map<std::string, core::Tensor> none;
  MapWeightSource empty(none);
  auto w = Qwen35Weights::Load(*cfg, empty, *plan);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(w.status().message()).find("model.embed_tokens.weight"), std::string::npos);
  std::map<std::string, core::Tensor> wrong;
  wrong["model.embed_tokens.weight"] = core::Tensor::Zeros({3, 3}, core::DType::kF32);
  MapWeightSource bad(wrong);
  auto w2 = Qwen35Weights::Load(*cfg, bad, *plan);
  EXPECT_EQ(w2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(w2.status().message()).find("[512, 64]"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::model
