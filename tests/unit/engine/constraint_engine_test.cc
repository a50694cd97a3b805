// Structured outputs in the engine: constrained requests sample only what their grammar allows
// (host sampling, and a runner that samples "on its device" from plan.masks the way the CUDA
// runner does), stop as soon as the grammar is complete and nothing may follow, keep a reasoning
// section free, and the masks are filled on the mask thread while the forward runs.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "core/status.h"
#include "engine/grammar_constraint.h"
#include "tests/unit/engine/engine_test_harness.h"
#include "text/constraint/regex_parser.h"

namespace sparkserve::engine::engine_test {
namespace {

namespace tc = text::constraint;

constexpr int32_t kEos = 63;
constexpr int32_t kThinkEnd = 62;

// The fake model's 64 ids as text: digits, letters, punctuation and a few multi-byte pieces; 62 is
// "</think>", 63 the (special) end of text.
std::vector<std::string> VocabularyText() {
  std::vector<std::string> t;
  for (char c = '0'; c <= '9'; ++c) t.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) t.push_back(std::string(1, c));
  for (const char* s : {"[", "]", ",", " ", "12", "],", ",3", "[4", "xyz", "99]", "0,", "<", "/", ">", "think", "\n",
                        "[1,2]", "ab", "a1", "], ", "[[", "]]", "-", "."}) {
    t.push_back(s);
  }
  while (t.size() < static_cast<size_t>(kThinkEnd)) t.push_back("q");
  t.push_back("</think>");
  t.push_back("");  // eos: no text
  return t;
}

const char* kPattern = "\\[(\\d{1,2},){0,3}\\d{1,2}\\]";

std::shared_ptr<const scheduler::OutputConstraint> Constraint(const std::string& reasoning_end = "") {
  auto vocab = tc::TokenVocabulary::Create(VocabularyText(), kVocab);
  auto g = tc::RegexGrammar(kPattern);
  EXPECT_TRUE(g.ok());
  auto compiled = tc::CompiledGrammar::Compile(*g, vocab);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  return std::make_shared<GrammarConstraint>(*compiled, reasoning_end, "regex");
}

std::string Text(const std::vector<int32_t>& ids) {
  const std::vector<std::string> t = VocabularyText();
  std::string s;
  for (int32_t id : ids) s += t[static_cast<size_t>(id)];
  return s;
}

// The end of text, and a stop id that is text ("a", as a checkpoint's eos can be in a tokenizer
// that was not made for it): the grammar never allows "a", so it never ends an output.
EngineConfig WithEos() {
  EngineConfig c;
  c.eos_token_ids = {kEos, 10};
  return c;
}

Request Sampled(int32_t max_tokens, uint64_t seed, int32_t n) {
  Request r;
  r.prompt_ids = Prompt(5, static_cast<int32_t>(seed));
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.n = n;
  return r;
}

TEST(EngineConstraint, HostSampledOutputsMatchTheGrammarAndStopWhenComplete) {
  Harness h(Capacity(8, 64), WithEos());
  h.engine->Start();
  const std::regex re(kPattern);
  int outputs = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Request r = Sampled(40, seed, 6);
    r.constraint = Constraint();
    Collector c(6);
    h.Submit(std::move(r), c);
    ASSERT_TRUE(c.Wait());
    for (int32_t i = 0; i < 6; ++i) {
      EXPECT_EQ(c.finish(i), FinishReason::kStop);
      const std::string text = Text(c.tokens(i));
      EXPECT_TRUE(std::regex_match(text, re)) << text;
      ++outputs;
    }
  }
  EXPECT_EQ(outputs, 24);
  const EngineStats st = h.engine->Stats();
  EXPECT_GT(st.constraint_mask_seconds_total, 0.0);
  h.ExpectIdleAndClean();
}

TEST(EngineConstraint, FreeRequestsBesideConstrainedOnesAreUnchanged) {
  Harness h(Capacity(8, 64), WithEos());
  h.engine->Start();
  Request free = Greedy(Prompt(6, 9), 12);
  const std::vector<int32_t> want = ReferenceGreedy(free.prompt_ids, kVocab, 12, {kEos, 10});
  Request constrained = Sampled(40, 5, 3);
  constrained.constraint = Constraint();
  Collector a, b(3);
  h.Submit(std::move(free), a);
  h.Submit(std::move(constrained), b);
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(a.tokens(), want);
  for (int32_t i = 0; i < 3; ++i) EXPECT_TRUE(std::regex_match(Text(b.tokens(i)), std::regex(kPattern)));
  h.ExpectIdleAndClean();
}

TEST(EngineConstraint, ReasoningIsFreeAndTheGrammarStartsAfterIt) {
  Harness h(Capacity(8, 64), WithEos());
  h.engine->Start();
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Request r = Sampled(60, seed, 4);
    r.constraint = Constraint("</think>");
    r.sampling.logit_bias[kThinkEnd] = 3.0f;  // end the junk reasoning within a few tokens
    Collector c(4);
    h.Submit(std::move(r), c);
    ASSERT_TRUE(c.Wait());
    for (int32_t i = 0; i < 4; ++i) {
      const std::vector<int32_t> ids = c.tokens(i);
      auto end = std::find(ids.begin(), ids.end(), kThinkEnd);
      if (end == ids.end()) {  // never left reasoning: free text, cut by max_tokens or eos
        EXPECT_NE(c.finish(i), FinishReason::kError);
        continue;
      }
      const std::string after = Text(std::vector<int32_t>(end + 1, ids.end()));
      EXPECT_TRUE(std::regex_match(after, std::regex(kPattern))) << after;
      EXPECT_EQ(c.finish(i), FinishReason::kStop);
    }
  }
  h.ExpectIdleAndClean();
}

// Samples "on the device" as the CUDA runner does: each row restricted to its plan.masks row after
// waiting for the engine's mask thread (ready()), then greedy.
class MaskingDeviceFake : public FakeModelRunner {
 public:
  using FakeModelRunner::FakeModelRunner;
  bool samples_on_device() const override { return true; }
  absl::StatusOr<model::StepOutput> Run(const model::StepPlan& plan) override {
    ASSIGN_OR_RETURN(model::StepOutput out, FakeModelRunner::Run(plan));
    plan.masks.WaitReady();
    out.sampled.resize(plan.sampling.size());
    for (size_t r = 0; r < plan.sampling.size(); ++r) {
      const int32_t m = plan.sampling[r].mask_row;
      float* row = out.logits.data<float>() + static_cast<int64_t>(r) * kVocab;
      if (m >= 0) {
        EXPECT_EQ(plan.masks.words_per_row, (kVocab + 31) / 32);
        ++masked_rows_;
        for (int32_t v = 0; v < kVocab; ++v) {
          const uint32_t word = plan.masks.words[static_cast<size_t>(m * plan.masks.words_per_row + v / 32)];
          if (!((word >> (v % 32)) & 1u)) row[v] = -INFINITY;
        }
      }
      for (int32_t id : plan.sampling[r].banned) row[id] = -INFINITY;
      out.sampled[r].id = static_cast<int32_t>(std::max_element(row, row + kVocab) - row);
    }
    return out;
  }
  int64_t masked_rows_ = 0;
};

TEST(EngineConstraint, DeviceSamplingRunnersGetTheMasksInThePlan) {
  auto fake = std::make_unique<MaskingDeviceFake>(Capacity(8, 64));
  MaskingDeviceFake* model = fake.get();
  auto engine = Engine::Create(std::move(fake), WithEos());
  ASSERT_TRUE(engine.ok());
  (*engine)->Start();
  std::vector<std::unique_ptr<Collector>> cs;
  for (int32_t i = 0; i < 4; ++i) {
    Request r = Greedy(Prompt(4 + i, 20 + i), 40);
    r.constraint = Constraint();
    cs.push_back(std::make_unique<Collector>());
    ASSERT_TRUE((*engine)->Submit(std::move(r), cs.back()->Sink()).ok());
  }
  for (auto& c : cs) {
    ASSERT_TRUE(c->Wait());
    EXPECT_EQ(c->finish(), FinishReason::kStop);
    EXPECT_TRUE(std::regex_match(Text(c->tokens()), std::regex(kPattern))) << Text(c->tokens());
  }
  EXPECT_GT(model->masked_rows_, 4 * 4);  // every constrained draw came with its mask
  // Masks only for constrained rows: a free request's plans carry none.
  EXPECT_TRUE(model->contract_errors().empty());
}

TEST(EngineConstraint, ConstraintForAnotherVocabularyIsRefused) {
  Harness h(Capacity(8, 64));
  auto vocab = tc::TokenVocabulary::Create({"a", "b"}, 2);
  auto compiled = tc::CompiledGrammar::Compile(*tc::RegexGrammar("a+"), vocab);
  ASSERT_TRUE(compiled.ok());
  Request r = Greedy(Prompt(3, 1), 4);
  r.constraint = std::make_shared<GrammarConstraint>(*compiled, "", "regex");
  Collector c;
  auto id = h.engine->Submit(std::move(r), c.Sink());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(id.status().message()).find("output constraint covers 2 token ids"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::engine::engine_test
