// The StepPlan codec: Decode(Encode(p)) equals p for random plans (every field, floats by bits),
// malformed bytes are refused, and a CPU runner fed decoded plans gives bit-identical logits and
// drafts to one fed the originals over a prefill / decode / verify / commit / draft sequence.
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "proto/step_plan_codec.h"
#include "proto/step_plan.pb.h"
#include "tests/unit/model/golden_fixture.h"

namespace sparkserve::proto {
namespace {

using model::LogitsWanted;

class RandomPlans {
 public:
  explicit RandomPlans(uint32_t seed) : rng_(seed) {}

  model::StepPlan Next() {
    model::StepPlan p;
    for (int i = Count(); i > 0; --i) p.copies.push_back({Int(), Int()});
    for (int i = Count(); i > 0; --i) p.commits.push_back({Int(), Int()});
    for (int i = Count(); i > 0; --i) {
      model::DraftWork& d = p.drafts.emplace_back();
      d.slot = Int();
      d.start_pos = Int();
      d.tokens = Ids();
      d.hidden_row = Int();
      d.num_drafts = Int();
      d.kv_pages = Ids();
      d.logits = Logits();
    }
    for (int i = Count(); i > 0; --i) {
      model::SeqWork& s = p.seqs.emplace_back();
      s.slot = Int();
      s.start_pos = Int();
      s.tokens = Ids();
      s.num_drafts = Int();
      s.kv_pages = Ids();
      s.logits = Logits();
      s.keep_column_states = rng_() & 1;
    }
    for (int i = Count(); i > 0; --i) {
      model::RowSampling& r = p.sampling.emplace_back();
      r.temperature = Float();
      r.top_k = Int();
      r.top_p = Float();
      r.min_p = Float();
      r.repetition_penalty = Float();
      r.frequency_penalty = Float();
      r.presence_penalty = Float();
      r.num_logprobs = Int();
      r.uniform = std::uniform_real_distribution<double>(0, 1)(rng_);
      r.banned = Ids();
      for (int32_t id : Ids()) r.bias.emplace_back(id, Float());
      r.history_ids = Ids();
      r.history_output_counts = Ids();
      r.mask_row = static_cast<int32_t>(rng_() % 5) - 1;
    }
    if (rng_() % 2) {  // token masks: rows of bit words, any bit pattern
      p.masks.words_per_row = 1 + static_cast<int32_t>(rng_() % 9);
      p.masks.words.resize(static_cast<size_t>(p.masks.words_per_row) * (rng_() % 4));
      for (uint32_t& w : p.masks.words) w = static_cast<uint32_t>(rng_());
    }
    return p;
  }

 private:
  int Count() { return static_cast<int>(rng_() % 4); }
  // Mostly small values, sometimes the extremes.
  int32_t Int() {
    switch (rng_() % 8) {
      case 0: return std::numeric_limits<int32_t>::min();
      case 1: return std::numeric_limits<int32_t>::max();
      case 2: return -static_cast<int32_t>(rng_() % 100);
      default: return static_cast<int32_t>(rng_() % 1000);
    }
  }
  std::vector<int32_t> Ids() {
    std::vector<int32_t> v(rng_() % 40);
    for (int32_t& x : v) x = rng_() % 5 == 0 ? std::numeric_limits<int32_t>::max() : static_cast<int32_t>(rng_() % 250000);
    return v;
  }
  float Float() {
    switch (rng_() % 6) {
      case 0: return -0.0f;
      case 1: return std::numeric_limits<float>::infinity();
      case 2: return std::numeric_limits<float>::denorm_min();
      default: return std::uniform_real_distribution<float>(-5, 5)(rng_);
    }
  }
  LogitsWanted Logits() { return static_cast<LogitsWanted>(rng_() % 3); }
  std::mt19937 rng_;
};

TEST(StepPlanCodec, RandomPlansRoundTrip) {
  RandomPlans gen(20261202);
  for (int i = 0; i < 2000; ++i) {
    const model::StepPlan p = gen.Next();
    auto back = DecodeStepPlan(EncodeStepPlan(p));
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_TRUE(SameStepPlan(p, *back)) << "plan " << i;
  }
}

TEST(StepPlanCodec, SameStepPlanSeesEveryDifference) {
  RandomPlans gen(7);
  model::StepPlan p;
  while (p.seqs.empty() || p.sampling.empty() || p.drafts.empty()) p = gen.Next();
  model::StepPlan q = p;
  ASSERT_TRUE(SameStepPlan(p, q));
  q.seqs[0].keep_column_states = !q.seqs[0].keep_column_states;
  EXPECT_FALSE(SameStepPlan(p, q));
  q = p;
  q.sampling[0].uniform = std::nextafter(q.sampling[0].uniform, 2.0);
  EXPECT_FALSE(SameStepPlan(p, q));
  q = p;
  q.drafts[0].hidden_row += 1;
  EXPECT_FALSE(SameStepPlan(p, q));
  q = p;
  q.sampling[0].mask_row += 1;
  EXPECT_FALSE(SameStepPlan(p, q));
  q = p;
  q.masks.words_per_row = 2;
  q.masks.words = {1, 2, 3, 4};
  model::StepPlan r = q;
  r.masks.words[3] ^= 1u << 31;
  EXPECT_TRUE(SameStepPlan(q, q));
  EXPECT_FALSE(SameStepPlan(q, r));
}

TEST(StepPlanCodec, MasksFilledLateAreEncodedComplete) {
  model::StepPlan p;
  p.masks.words_per_row = 2;
  p.masks.words.assign(4, 0);
  // The engine's mask thread fills the words; the encoder waits for it through ready().
  p.masks.ready = [&p] { p.masks.words = {5, 6, 7, 0xFFFFFFFFu}; };
  auto back = DecodeStepPlan(EncodeStepPlan(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->masks.words, (std::vector<uint32_t>{5, 6, 7, 0xFFFFFFFFu}));
  EXPECT_EQ(back->masks.rows(), 2);
}

TEST(StepPlanCodec, MalformedBytesAreRefused) {
  EXPECT_EQ(DecodeStepPlan("\xff\xff\xff").status().code(), absl::StatusCode::kInvalidArgument);
  StepPlanMsg msg;
  msg.add_seqs()->add_tokens(0x80000000u);  // past int32
  auto r = DecodeStepPlan(msg.SerializeAsString());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("past int32"), std::string::npos);
  StepPlanMsg bias;
  bias.add_sampling()->add_bias_ids(3);  // no value
  EXPECT_EQ(DecodeStepPlan(bias.SerializeAsString()).status().code(), absl::StatusCode::kInvalidArgument);
  StepPlanMsg kind;
  kind.add_seqs()->set_logits(static_cast<LogitsKind>(7));
  EXPECT_EQ(DecodeStepPlan(kind.SerializeAsString()).status().code(), absl::StatusCode::kInvalidArgument);
  StepPlanMsg masks;
  masks.mutable_masks()->set_words_per_row(3);
  masks.mutable_masks()->add_words(1);  // not a whole row
  EXPECT_EQ(DecodeStepPlan(masks.SerializeAsString()).status().code(), absl::StatusCode::kInvalidArgument);
}

bool SameBits(const core::Tensor& a, const core::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(StepPlanCodec, ACpuRunnerFedDecodedPlansGivesBitIdenticalResults) {
  using model::testing::Golden;
  using model::testing::Pages;
  using model::testing::Seq;
  const Golden g = model::testing::LoadGolden("text_tied");
  auto direct = model::testing::Load("text_tied");
  auto replayed = model::testing::Load("text_tied");
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(replayed, nullptr);
  const int32_t T = static_cast<int32_t>(g.ids.size());
  std::vector<model::StepPlan> plans;
  // A prefill in two chunks beside a second sequence, then a decode.
  model::StepPlan a;
  a.seqs = {Seq(0, 0, {g.ids.begin(), g.ids.begin() + 12}, Pages(0, 8), LogitsWanted::kNone),
            Seq(1, 0, {g.ids.begin(), g.ids.begin() + 5}, Pages(8, 8))};
  plans.push_back(a);
  model::StepPlan b;
  b.seqs = {Seq(0, 12, {g.ids.begin() + 12, g.ids.end()}, Pages(0, 8), LogitsWanted::kLast),
            Seq(1, 5, {g.ids[5]}, Pages(8, 8), LogitsWanted::kLast)};
  plans.push_back(b);
  // MTP drafts from slot 0's last prompt position (row 8 of the last forward: 9 tokens in seq 0)
  // verified in the same step, then a commit of two columns and a slot copy.
  model::StepPlan c;
  model::DraftWork& d = c.drafts.emplace_back();
  d.slot = 0;
  d.start_pos = T - 1;
  d.tokens = {g.greedy[0]};
  d.hidden_row = T - 12 - 1;
  d.num_drafts = 3;
  d.kv_pages = Pages(0, 8);
  d.logits = LogitsWanted::kAll;
  model::SeqWork verify = Seq(0, T, {g.greedy[0]}, Pages(0, 8), LogitsWanted::kAll);
  verify.num_drafts = 3;
  verify.keep_column_states = true;
  c.seqs = {verify};
  plans.push_back(c);
  model::StepPlan e;
  e.commits = {{0, 2}};
  e.copies = {{0, 2}};
  e.seqs = {Seq(2, T + 2, {g.ids[3]}, Pages(0, 8), LogitsWanted::kLast)};
  plans.push_back(e);
  for (size_t i = 0; i < plans.size(); ++i) {
    SCOPED_TRACE(i);
    auto decoded = DecodeStepPlan(EncodeStepPlan(plans[i]));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    auto x = direct->Run(plans[i]);
    auto y = replayed->Run(*decoded);
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_TRUE(SameBits(x->logits, y->logits));
    EXPECT_TRUE(SameBits(x->draft_logits, y->draft_logits));
    EXPECT_EQ(x->drafts, y->drafts);
    EXPECT_EQ(x->logit_row_begin, y->logit_row_begin);
    if (i == 2) {
      ASSERT_EQ(x->drafts.size(), 1u);
      EXPECT_EQ(x->drafts[0].size(), 3u);
      EXPECT_EQ(x->logits.dim(0), 4);  // 1 + 3 verify columns
    }
  }
}

}  // namespace
}  // namespace sparkserve::proto
