// Speculative decoding through the engine on the CPU reference runner (golden Qwen3.5 fixtures, MTP
// block included): greedy output with speculation equals plain output token for token, for both
// drafters and k = 1..5, alone, 8 at once and under preemption; drafters that replay the known
// continuation (every draft accepted) or propose wrong or random tokens (none accepted); seeded
// sampling gives plain decoding's tokens and a chi-square test over many seeds finds the same
// distribution; the auto policy turns drafting down when nothing is accepted; constrained outputs
// never draft.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/grammar_constraint.h"
#include "model/cpu/cpu_model_loader.h"
#include "quant/safetensors_reader.h"
#include "text/constraint/regex_parser.h"

namespace sparkserve::engine {
namespace {

using scheduler::Request;

std::string GoldenDir(const std::string& name) {
  return std::string(SPARKSERVE_SOURCE_DIR) + "/tests/golden/qwen35/" + name;
}

struct EngineOptions {
  int32_t max_batch = 1;
  int32_t max_seq_len = 96;
  int32_t num_pages = 0;  // 0: enough for every sequence
  SpecConfig spec;
  int32_t prefill_chunk = 16;  // prompts prefill over several steps: MTP work follows every chunk
  // Wraps the runner (tests that look at the plans and outputs); null: none.
  std::function<std::unique_ptr<model::ModelRunner>(std::unique_ptr<model::ModelRunner>)> wrap;
};

std::unique_ptr<Engine> MakeEngine(const std::string& fixture, const EngineOptions& o) {
  model::cpu::CpuRunnerOptions r;
  r.max_seq_len = o.max_seq_len;
  r.state.num_slots = o.max_batch;
  r.state.kv_page_size = 4;
  r.state.num_kv_pages = o.num_pages > 0 ? o.num_pages : o.max_batch * ((o.max_seq_len + 3) / 4);
  r.state.max_verify_tokens = o.spec.mode == SpecMode::kOff ? 1 : o.spec.max_drafts + 1;
  auto loaded = model::cpu::LoadCpuModel(GoldenDir(fixture), r);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return nullptr;
  std::unique_ptr<model::ModelRunner> runner = std::move(*loaded);
  if (o.wrap) runner = o.wrap(std::move(runner));
  EngineConfig ec;
  ec.scheduler.max_batch = o.max_batch;
  ec.scheduler.max_step_tokens = 256;
  ec.scheduler.prefill_chunk = o.prefill_chunk;
  ec.spec = o.spec;
  auto engine = Engine::Create(std::move(runner), ec);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return nullptr;
  (*engine)->Start();
  return std::move(*engine);
}

Request Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  r.stop.ignore_eos = true;
  return r;
}

// Prompts with repeats (the n-gram drafter finds matches) and without.
std::vector<std::vector<int32_t>> Prompts() {
  std::vector<std::vector<int32_t>> p;
  p.push_back({1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3});
  p.push_back({40, 41, 42, 43, 40, 41, 42});
  std::mt19937 rng(5);
  std::vector<int32_t> random;
  for (int i = 0; i < 23; ++i) random.push_back(static_cast<int32_t>(rng() % 500));
  p.push_back(random);
  p.push_back({7});
  return p;
}

std::vector<int32_t> Output(Engine& e, Request r) {
  auto out = Generate(e, std::move(r), std::chrono::seconds(60));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->front().ids : std::vector<int32_t>{};
}

// Each prompt submitted at once (so they share steps), outputs in prompt order.
std::vector<std::vector<int32_t>> RunAll(Engine& e, const std::vector<Request>& requests) {
  std::vector<std::vector<int32_t>> out(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = Output(e, requests[i]); });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::map<std::vector<int32_t>, std::vector<int32_t>> PlainOutputs(const std::string& fixture, int32_t max_tokens) {
  auto e = MakeEngine(fixture, {});
  std::map<std::vector<int32_t>, std::vector<int32_t>> out;
  for (const auto& p : Prompts()) out[p] = Output(*e, Greedy(p, max_tokens));
  return out;
}

SpecConfig Spec(SpecMode mode, int32_t k, SpecPolicy policy = SpecPolicy::kFixed) {
  SpecConfig s;
  s.mode = mode;
  s.max_drafts = k;
  s.policy = policy;
  return s;
}

class SpecGreedy : public testing::TestWithParam<std::string> {};

TEST_P(SpecGreedy, BothDraftersEveryKEqualPlain) {
  constexpr int32_t kTokens = 20;
  const auto plain = PlainOutputs(GetParam(), kTokens);
  for (SpecMode mode : {SpecMode::kMtp, SpecMode::kNgram}) {
    for (int32_t k = 1; k <= 5; ++k) {
      auto e = MakeEngine(GetParam(), {.max_batch = 1, .spec = Spec(mode, k)});
      for (const auto& [prompt, want] : plain) {
        EXPECT_EQ(Output(*e, Greedy(prompt, kTokens)), want) << SpecModeName(mode) << " k=" << k;
      }
      const EngineStats st = e->Stats();
      // MTP always drafts; n-gram lookup only where the history repeats a bigram somewhere.
      bool lookup_hits = false;
      for (const auto& [prompt, out] : plain) {
        for (size_t i = 1; i < out.size(); ++i) {
          std::vector<int32_t> history = prompt;
          history.insert(history.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(i));
          lookup_hits = lookup_hits || !NgramDrafter().Propose(history, 1).empty();
        }
      }
      EXPECT_EQ(st.spec_num_draft_tokens > 0, mode == SpecMode::kMtp || lookup_hits)
          << SpecModeName(mode) << " k=" << k;
      EXPECT_LE(st.spec_num_accepted_tokens, st.spec_num_draft_tokens);
      e->Shutdown();
      EXPECT_EQ(e->Stats().free_kv_pages, e->Stats().total_kv_pages) << "pages leaked";
    }
  }
}

TEST_P(SpecGreedy, EightAtOnceAndAutoPolicyEqualPlain) {
  constexpr int32_t kTokens = 20;
  const auto plain = PlainOutputs(GetParam(), kTokens);
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> want;
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& [prompt, out] : plain) {
      requests.push_back(Greedy(prompt, kTokens));
      want.push_back(out);
    }
  }
  ASSERT_EQ(requests.size(), 8u);
  for (SpecMode mode : {SpecMode::kMtp, SpecMode::kNgram}) {
    for (SpecPolicy policy : {SpecPolicy::kFixed, SpecPolicy::kAuto}) {
      auto e = MakeEngine(GetParam(), {.max_batch = 8, .spec = Spec(mode, 3, policy)});
      EXPECT_EQ(RunAll(*e, requests), want) << SpecModeName(mode) << " " << SpecPolicyName(policy);
    }
  }
}

TEST_P(SpecGreedy, PreemptedSequencesStillEqualPlain) {
  constexpr int32_t kTokens = 24;
  const auto plain = PlainOutputs(GetParam(), kTokens);
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> want;
  for (int rep = 0; rep < 2; ++rep) {
    for (const auto& [prompt, out] : plain) {
      requests.push_back(Greedy(prompt, kTokens));
      want.push_back(out);
    }
  }
  for (SpecMode mode : {SpecMode::kMtp, SpecMode::kNgram}) {
    // 8 slots but 24 pages of 4 positions for 8 sequences of up to 47: some are preempted and resume.
    auto e = MakeEngine(GetParam(), {.max_batch = 8, .max_seq_len = 64, .num_pages = 24, .spec = Spec(mode, 4)});
    EXPECT_EQ(RunAll(*e, requests), want) << SpecModeName(mode);
    const EngineStats st = e->Stats();
    EXPECT_GT(st.num_preemptions_total, 0);
    if (mode == SpecMode::kMtp) {
      EXPECT_GT(st.spec_num_draft_tokens, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpecGreedy, testing::Values("text_tied", "text_untied", "vl_tied", "vl_untied"));

// Passes every step to the runner it wraps and keeps the MTP drafts each step made.
class DraftRecorder : public model::ModelRunner {
 public:
  explicit DraftRecorder(std::unique_ptr<model::ModelRunner> inner, std::vector<std::vector<int32_t>>* drafts)
      : inner_(std::move(inner)), drafts_(drafts) {}
  model::ModelCapacity capacity() const override { return inner_->capacity(); }
  bool has_mtp() const override { return inner_->has_mtp(); }
  absl::StatusOr<model::StepOutput> Run(const model::StepPlan& plan) override {
    auto out = inner_->Run(plan);
    if (out.ok()) {
      for (const auto& d : out->drafts) {
        if (!d.empty()) drafts_->push_back(d);
      }
    }
    return out;
  }

 private:
  std::unique_ptr<model::ModelRunner> inner_;
  std::vector<std::vector<int32_t>>* drafts_;
};

// The MTP work the scheduler plans (teacher forcing after every prefill chunk, then the drafts of
// the first verify window) gives the reference's K-step greedy drafts after the prompt
// (tests/golden/make_qwen35_golden.py, the same as the CPU runner's own golden test).
TEST(SpecMtp, FirstVerifyDraftsAfterChunkedPrefillMatchReference) {
  for (const std::string fixture : {"text_tied", "vl_untied"}) {
    auto f = quant::SafetensorsFile::Open(GoldenDir(fixture) + "/reference.safetensors");
    ASSERT_TRUE(f.ok()) << f.status();
    const auto read = [&](const char* name) {
      auto t = f->Get(name);
      EXPECT_TRUE(t.ok()) << name;
      std::vector<int32_t> v(static_cast<size_t>(t->numel()));
      std::memcpy(v.data(), t->raw_data(), t->nbytes());
      return v;
    };
    const std::vector<int32_t> ids = read("ids"), greedy = read("greedy"), want = read("draft_tokens");
    ASSERT_GE(ids.size(), 4u);
    ASSERT_TRUE(!want.empty() && want.size() <= 8u);
    std::vector<std::vector<int32_t>> drafts;
    EngineOptions o;
    o.spec = Spec(SpecMode::kMtp, static_cast<int32_t>(want.size()));
    o.prefill_chunk = 3;  // several chunks, each teacher-forced in the step after it
    o.wrap = [&](std::unique_ptr<model::ModelRunner> r) { return std::make_unique<DraftRecorder>(std::move(r), &drafts); };
    auto e = MakeEngine(fixture, o);
    const auto out = Output(*e, Greedy(ids, static_cast<int32_t>(want.size()) + 2));
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.front(), greedy.front());
    ASSERT_FALSE(drafts.empty());
    EXPECT_EQ(drafts.front(), want) << fixture;
  }
}

// Drafts on the host from each prompt's known plain continuation: exactly it (replay), each token
// plus one (wrong), or random tokens.
class KnownContinuationDrafter : public Drafter {
 public:
  enum Kind { kReplay, kWrong, kRandom };
  KnownContinuationDrafter(std::map<std::vector<int32_t>, std::vector<int32_t>> known, Kind kind)
      : known_(std::move(known)), kind_(kind) {}
  std::string_view name() const override { return "known"; }
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int32_t max_drafts) override {
    for (const auto& [prompt, out] : known_) {
      if (tokens.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), tokens.begin())) continue;
      const size_t at = tokens.size() - prompt.size();
      if (!std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(std::min(at, out.size())),
                      tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()))) {
        continue;  // another prompt that starts the same way
      }
      std::vector<int32_t> d;
      for (size_t i = at; i < out.size() && static_cast<int32_t>(d.size()) < max_drafts; ++i) {
        d.push_back(kind_ == kReplay ? out[i] : kind_ == kWrong ? (out[i] + 1) % 512 : static_cast<int32_t>(rng_() % 512));
      }
      return d;
    }
    return {};
  }

 private:
  std::map<std::vector<int32_t>, std::vector<int32_t>> known_;
  Kind kind_;
  std::mt19937 rng_{11};
};

TEST(SpecDrafters, ReplayIsAllAcceptedWrongNoneRandomSameOutput) {
  constexpr int32_t kTokens = 20;
  const auto plain = PlainOutputs("text_untied", kTokens);
  for (auto kind : {KnownContinuationDrafter::kReplay, KnownContinuationDrafter::kWrong, KnownContinuationDrafter::kRandom}) {
    for (int32_t k : {1, 3, 5}) {
      SpecConfig s = Spec(SpecMode::kNgram, k);
      s.drafter = std::make_shared<KnownContinuationDrafter>(plain, kind);
      auto e = MakeEngine("text_untied", {.max_batch = 4, .spec = s});
      for (const auto& [prompt, want] : plain) EXPECT_EQ(Output(*e, Greedy(prompt, kTokens)), want) << kind << " k=" << k;
      const EngineStats st = e->Stats();
      ASSERT_GT(st.spec_num_draft_tokens, 0);
      if (kind == KnownContinuationDrafter::kReplay) {
        EXPECT_EQ(st.spec_num_accepted_tokens, st.spec_num_draft_tokens) << "k=" << k;
        // Every window but the last of a request is full: far fewer steps than tokens.
        EXPECT_LE(st.spec_num_drafts, static_cast<int64_t>(plain.size()) * (kTokens / (k + 1) + 2));
        ASSERT_EQ(st.spec_accepted_per_pos.size(), static_cast<size_t>(k));
        EXPECT_EQ(st.spec_accepted_per_pos[0], st.spec_num_drafts);
      } else if (kind == KnownContinuationDrafter::kWrong) {
        EXPECT_EQ(st.spec_num_accepted_tokens, 0);
      }
    }
  }
}

TEST(SpecPolicyAuto, TurnsDraftingDownWhenNothingIsAcceptedAndUpWhenAllIs) {
  constexpr int32_t kTokens = 60;
  auto prompts = Prompts();
  std::map<std::vector<int32_t>, std::vector<int32_t>> plain;
  {
    auto e = MakeEngine("text_tied", {.max_seq_len = 128});
    for (const auto& p : prompts) plain[p] = Output(*e, Greedy(p, kTokens));
  }
  for (auto kind : {KnownContinuationDrafter::kWrong, KnownContinuationDrafter::kReplay}) {
    SpecConfig s = Spec(SpecMode::kNgram, 4, SpecPolicy::kAuto);
    s.drafter = std::make_shared<KnownContinuationDrafter>(plain, kind);
    // A GPU-like curve (a few tokens cost about one), fixed: the policy's choices must not depend
    // on this machine's load (measured costs on a loaded 2-core machine made drafting look dear).
    s.fixed_costs = {{1, 1.0e-3}, {8, 1.1e-3}, {32, 1.5e-3}, {256, 6.0e-3}};
    auto e = MakeEngine("text_tied", {.max_batch = 4, .max_seq_len = 128, .spec = s});
    std::vector<Request> requests;
    std::vector<std::vector<int32_t>> want;
    for (const auto& [p, out] : plain) {
      requests.push_back(Greedy(p, kTokens));
      want.push_back(out);
    }
    EXPECT_EQ(RunAll(*e, requests), want);
    const EngineStats st = e->Stats();
    const int64_t generated = static_cast<int64_t>(plain.size()) * kTokens;
    if (kind == KnownContinuationDrafter::kWrong) {
      // A few tries while the prior is hopeful, then a one-draft probe every 16 idle steps: far
      // below the 4 x generated that drafting K every step would make. How many sequences try
      // before the pooled rate has learnt depends on how the requests' arrivals fall into steps
      // (seen: 16-75 drafts), hence the margin.
      EXPECT_LT(st.spec_num_draft_tokens, generated / 2) << st.spec_num_draft_tokens;
    } else {
      EXPECT_GT(st.spec_num_accepted_tokens, generated / 2) << st.spec_num_accepted_tokens;
    }
  }
}

// Seeded sampling: each draw uses the uniform of its index in the output, so with speculation a
// seeded request gives plain decoding's tokens.
TEST(SpecSampling, SeededSamplesEqualPlain) {
  for (SpecMode mode : {SpecMode::kMtp, SpecMode::kNgram}) {
    auto plain = MakeEngine("vl_tied", {.max_batch = 4});
    auto spec = MakeEngine("vl_tied", {.max_batch = 4, .spec = Spec(mode, 3)});
    for (uint64_t seed = 0; seed < 6; ++seed) {
      for (const auto& p : Prompts()) {
        Request r = Greedy(p, 16);
        r.sampling.temperature = 0.8f;
        r.sampling.top_k = 20;
        r.sampling.seed = seed;
        EXPECT_EQ(Output(*spec, r), Output(*plain, r)) << SpecModeName(mode) << " seed " << seed;
      }
    }
  }
}

// Two-sample chi-square statistic over the bins both samples fill (rare ids pooled), and its
// degrees of freedom.
std::pair<double, int> ChiSquare(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b) {
  std::map<int32_t, std::pair<int, int>> bins;
  for (const auto& [id, n] : a) bins[id].first += n;
  for (const auto& [id, n] : b) bins[id].second += n;
  std::pair<int, int> rare{0, 0};
  double chi = 0.0;
  int df = -1;
  const auto add = [&](std::pair<int, int> c) {
    if (c.first + c.second == 0) return;
    chi += std::pow(c.first - c.second, 2) / (c.first + c.second);
    ++df;
  };
  for (const auto& [id, c] : bins) {
    if (c.first + c.second < 10) {
      rare.first += c.first;
      rare.second += c.second;
    } else {
      add(c);
    }
  }
  add(rare);
  return {chi, df};
}

// The 99.9% quantile of chi-square with df degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.09, k = df;
  return k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3);
}

// The first tokens drafts decide (output positions 1..3) of many seeded requests at a low
// temperature: with speculation (a drafter proposing the greedy continuation, which the samples
// mostly follow, so drafts are often accepted and often rejected) and without, from disjoint seeds,
// have the same distribution. The statistic does see a different distribution (temperature 0.8
// against 0.4), so it can fail.
TEST(SpecSampling, ChiSquareFirstTokensMatchPlainDistribution) {
  constexpr int kSamples = 1200;
  constexpr float kTemperature = 0.4f;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};
  const auto sample = [&](Engine& e, float temperature, uint64_t seed0) {
    std::vector<std::map<int32_t, int>> hist(3);
    std::vector<Request> batch;
    for (int i = 0; i < kSamples; ++i) {
      Request r = Greedy(prompt, 4);
      r.sampling.temperature = temperature;
      r.sampling.top_k = 6;
      r.sampling.seed = seed0 + static_cast<uint64_t>(i);
      batch.push_back(std::move(r));
      if (batch.size() == 16 || i + 1 == kSamples) {
        for (const auto& out : RunAll(e, batch)) {
          for (size_t pos = 1; pos < out.size(); ++pos) hist[pos - 1][out[pos]]++;
        }
        batch.clear();
      }
    }
    return hist;
  };
  auto plain = MakeEngine("text_untied", {.max_batch = 16});
  const std::vector<int32_t> greedy = Output(*plain, Greedy(prompt, 8));
  SpecConfig s = Spec(SpecMode::kNgram, 3);
  s.drafter = std::make_shared<KnownContinuationDrafter>(
      std::map<std::vector<int32_t>, std::vector<int32_t>>{{prompt, greedy}}, KnownContinuationDrafter::kReplay);
  auto spec_engine = MakeEngine("text_untied", {.max_batch = 16, .spec = s});
  const auto a = sample(*plain, kTemperature, 0);
  const auto b = sample(*spec_engine, kTemperature, 1000000);
  const EngineStats st = spec_engine->Stats();
  EXPECT_GT(st.spec_num_accepted_tokens, kSamples / 10) << "drafts were rarely accepted";
  EXPECT_GT(st.spec_num_draft_tokens - st.spec_num_accepted_tokens, kSamples / 4) << "drafts were rarely rejected";
  for (size_t pos = 0; pos < 3; ++pos) {
    const auto [chi, df] = ChiSquare(a[pos], b[pos]);
    ASSERT_GT(df, 1);
    EXPECT_LT(chi, ChiSquareCritical(df)) << "position " << pos + 1 << ": chi2 " << chi << " df " << df;
  }
  const auto hot = sample(*plain, 2 * kTemperature, 2000000);
  bool told = false;
  for (size_t pos = 0; pos < 3; ++pos) {
    const auto [chi, df] = ChiSquare(a[pos], hot[pos]);
    told = told || chi > ChiSquareCritical(df);
  }
  EXPECT_TRUE(told) << "the test cannot tell temperature 0.8 from 0.4";
}

// Constrained outputs never draft (the design choice: a verify column would need the mask of
// the state after the drafts before them); their output is plain constrained decoding's.
TEST(SpecConstraint, ConstrainedRequestsDoNotDraft) {
  std::vector<std::string> text;
  for (int i = 0; i < 512; ++i) text.push_back(std::string(1, static_cast<char>('a' + i % 26)));
  auto vocab = text::constraint::TokenVocabulary::Create(text, 512);
  auto g = text::constraint::RegexGrammar("[abc]{3,12}");
  ASSERT_TRUE(g.ok());
  auto compiled = text::constraint::CompiledGrammar::Compile(*g, vocab);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto constraint = std::make_shared<GrammarConstraint>(*compiled, "", "regex");
  Request r = Greedy({1, 2, 3, 1, 2, 3, 1, 2}, 12);
  r.constraint = constraint;
  auto plain = MakeEngine("text_tied", {});
  const auto want = Output(*plain, r);
  ASSERT_GE(want.size(), 3u);
  for (SpecMode mode : {SpecMode::kMtp, SpecMode::kNgram}) {
    auto e = MakeEngine("text_tied", {.spec = Spec(mode, 3)});
    EXPECT_EQ(Output(*e, r), want);
    EXPECT_EQ(e->Stats().spec_num_draft_tokens, 0);
  }
}

}  // namespace
}  // namespace sparkserve::engine
