// Sampler: hand-computed processing and truncation cases, greedy/top_k=1 equivalence, seeded
// reproducibility, frequencies against softmax, raw logprobs, and errors on bad rows.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace sparkserve::engine {
namespace {

using scheduler::SamplingParams;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::set<int32_t> Ids(const std::vector<TokenProb>& dist) {
  std::set<int32_t> ids;
  for (const auto& t : dist) ids.insert(t.id);
  return ids;
}

SamplingParams Temp(float t) {
  SamplingParams p;
  p.temperature = t;
  return p;
}

std::vector<float> RandomRow(std::mt19937& rng, int32_t n) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& v : row) v = normal(rng);
  return row;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(5);
  SamplingParams p = Temp(0.0f);
  SamplingContext ctx{&p};
  auto t = s.Sample(std::vector<float>{1.0f, 3.0f, -2.0f, 3.0f, 0.5f}, ctx);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->id, 1);
  // Below vLLM's epsilon the request is greedy too.
  p.temperature = 1e-6f;
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 3.0f, -2.0f, 3.5f, 0.5f}, ctx)->id, 3);
}

TEST(Sampler, TopK1EqualsGreedyForAnySeedAndTemperature) {
  std::mt19937 rng(7);
  Sampler s(50);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row = RandomRow(rng, 50);
    SamplingParams greedy = Temp(0.0f);
    SamplingParams k1 = Temp(0.3f + 0.01f * static_cast<float>(trial));
    k1.top_k = 1;
    k1.top_p = 0.9f;
    SamplingContext g{&greedy};
    SamplingContext c{&k1};
    c.rng_seed = static_cast<uint64_t>(trial);
    EXPECT_EQ(s.Sample(row, g)->id, s.Sample(row, c)->id);
  }
}

TEST(Sampler, TopPCutoffIsExactAtBoundaries) {
  // probabilities 0.5, 0.25, 0.125, 0.125
  const std::vector<float> row = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  Sampler s(4);
  auto kept = [&](float top_p) {
    SamplingParams p = Temp(1.0f);
    p.top_p = top_p;
    return Ids(*s.Truncate(row, p));
  };
  // A token stays while the mass of the tokens more probable than it is < top_p.
  EXPECT_EQ(kept(0.5f), (std::set<int32_t>{0}));
  EXPECT_EQ(kept(0.5001f), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.75f), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(kept(0.7501f), (std::set<int32_t>{0, 1, 2}));  // mass before token 2 is .75, before 3 .875
  EXPECT_EQ(kept(0.875f), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept(0.8751f), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(kept(0.01f), (std::set<int32_t>{0}));
  EXPECT_EQ(kept(1.0f), (std::set<int32_t>{0, 1, 2, 3}));
  // Renormalised over what is kept.
  SamplingParams p = Temp(1.0f);
  p.top_p = 0.75f;
  auto dist = *s.Truncate(row, p);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_NEAR(dist[0].prob, 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(dist[1].prob, 1.0 / 3.0, 1e-6);
}

TEST(Sampler, TopPOverALargeFlatVocabularySortsAsFarAsNeeded) {
  // 5000 equal tokens: top_p = 0.5 keeps exactly 2500 (mass before the 2501st is 0.5).
  Sampler s(5000);
  std::vector<float> row(5000, 1.0f);
  SamplingParams p = Temp(1.0f);
  p.top_p = 0.5f;
  auto dist = *s.Truncate(row, p);
  EXPECT_EQ(dist.size(), 2500u);
  EXPECT_EQ(dist.front().id, 0);  // equal weights: lower ids first
  EXPECT_EQ(dist.back().id, 2499);
}

// Brute force: softmax(l / T), full sort, then min_p, top_k and top_p as documented.
std::vector<TokenProb> ReferenceTruncate(const std::vector<float>& logits, const SamplingParams& p) {
  double max = -1e300;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<TokenProb> all;
  for (size_t i = 0; i < logits.size(); ++i) {
    all.push_back({static_cast<int32_t>(i), std::exp((logits[i] - max) / p.temperature)});
  }
  std::sort(all.begin(), all.end(), [](const TokenProb& a, const TokenProb& b) {
    return a.prob > b.prob || (a.prob == b.prob && a.id < b.id);
  });
  std::vector<TokenProb> kept;
  for (const auto& t : all) {
    if (t.prob >= p.min_p) kept.push_back(t);
  }
  if (p.top_k > 0 && kept.size() > static_cast<size_t>(p.top_k)) kept.resize(static_cast<size_t>(p.top_k));
  double total = 0;
  for (const auto& t : kept) total += t.prob;
  if (p.top_p < 1.0f) {
    size_t keep = 0;
    double before = 0;
    while (keep < kept.size() && (keep == 0 || before < p.top_p * total)) before += kept[keep++].prob;
    kept.resize(keep);
  }
  total = 0;
  for (const auto& t : kept) total += t.prob;
  for (auto& t : kept) t.prob /= total;
  return kept;
}

// Probabilities below 1e-25 are under float range before normalisation: they never get drawn.
std::vector<TokenProb> Drawable(std::vector<TokenProb> dist) {
  dist.erase(std::remove_if(dist.begin(), dist.end(), [](const TokenProb& t) { return t.prob <= 1e-25; }),
             dist.end());
  return dist;
}

TEST(Sampler, TruncationMatchesABruteForceReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t vocab = 1 + static_cast<int32_t>(rng() % 3000);
    std::normal_distribution<float> normal(0.0f, 0.5f + static_cast<float>(rng() % 8));
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& v : row) v = normal(rng);
    SamplingParams p = Temp(0.2f + static_cast<float>(rng() % 20) * 0.1f);
    p.top_p = (rng() % 3 == 0) ? 1.0f : 0.05f + static_cast<float>(rng() % 95) * 0.01f;
    p.top_k = (rng() % 2 == 0) ? 0 : 1 + static_cast<int32_t>(rng() % 100);
    p.min_p = (rng() % 3 == 0) ? 0.03f * static_cast<float>(rng() % 10) : 0.0f;
    Sampler s(vocab);
    auto got = s.Truncate(row, p);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<TokenProb> want = Drawable(ReferenceTruncate(row, p));
    // Cuts may differ only for a token whose boundary mass is within rounding of the limit.
    std::map<int32_t, double> got_probs;
    *got = Drawable(std::move(*got));
    for (const auto& t : *got) got_probs[t.id] = t.prob;
    ASSERT_LE(std::abs(static_cast<int>(got->size()) - static_cast<int>(want.size())), 1)
        << "trial " << trial << " vocab " << vocab << " T " << p.temperature << " top_p " << p.top_p << " top_k "
        << p.top_k << " min_p " << p.min_p << " got " << got->size() << " want " << want.size();
    size_t matched = 0;
    for (const auto& t : want) {
      if (got_probs.count(t.id)) {
        ++matched;
        if (got->size() == want.size()) {
          EXPECT_NEAR(got_probs[t.id], t.prob, 1e-5) << "trial " << trial;
        }
      }
    }
    EXPECT_GE(matched + 1, want.size()) << "trial " << trial;
    EXPECT_GE(matched + 1, got->size()) << "trial " << trial;
  }
}

TEST(Sampler, TopKKeepsTheKBestWithTemperatureApplied) {
  Sampler s(6);
  const std::vector<float> row = {0.0f, 5.0f, 1.0f, 4.0f, 3.0f, 2.0f};
  SamplingParams p = Temp(2.0f);
  p.top_k = 3;
  auto dist = *s.Truncate(row, p);
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[0].id, 1);
  EXPECT_EQ(dist[1].id, 3);
  EXPECT_EQ(dist[2].id, 4);
  const double z = 1.0 + std::exp(-0.5) + std::exp(-1.0);  // softmax(l / 2) over the three
  EXPECT_NEAR(dist[0].prob, 1.0 / z, 1e-6);
  EXPECT_NEAR(dist[2].prob, std::exp(-1.0) / z, 1e-6);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTopProbability) {
  // relative probabilities 1, 0.5, 0.1, 0.05
  const std::vector<float> row = {0.0f, std::log(0.5f), std::log(0.1f), std::log(0.05f)};
  Sampler s(4);
  SamplingParams p = Temp(1.0f);
  p.min_p = 0.2f;
  EXPECT_EQ(Ids(*s.Truncate(row, p)), (std::set<int32_t>{0, 1}));
  p.min_p = 0.08f;
  EXPECT_EQ(Ids(*s.Truncate(row, p)), (std::set<int32_t>{0, 1, 2}));
  // After temperature 0.5 the relative probabilities square: 1, .25, .01, .0025.
  p.temperature = 0.5f;
  p.min_p = 0.2f;
  EXPECT_EQ(Ids(*s.Truncate(row, p)), (std::set<int32_t>{0, 1}));
  p.min_p = 0.3f;
  EXPECT_EQ(Ids(*s.Truncate(row, p)), (std::set<int32_t>{0}));
}

TEST(Sampler, PenaltiesChangeTheRightLogitsByTheRightAmounts) {
  Sampler s(8);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{5, 3.0f}, {6, -1.0f}};
  const std::vector<int32_t> prompt = {1, 2, 2};
  const std::vector<int32_t> output = {2, 3, 3, 3, 4};
  const std::vector<int32_t> banned = {7};
  SamplingContext ctx{&p, prompt, output, banned};
  std::vector<float> l = {1.0f, 4.0f, -2.0f, 6.0f, -1.0f, 1.0f, 2.0f, 9.0f};
  s.ProcessLogits(l, ctx);
  EXPECT_FLOAT_EQ(l[0], 1.0f);                          // untouched
  EXPECT_FLOAT_EQ(l[1], 2.0f);                          // prompt only: 4 / 2
  EXPECT_FLOAT_EQ(l[2], -4.0f - 0.5f - 0.25f);          // prompt + output once: -2 * 2, then f*1 + p
  EXPECT_FLOAT_EQ(l[3], 3.0f - 1.5f - 0.25f);           // 6 / 2, then 3 occurrences
  EXPECT_FLOAT_EQ(l[4], -2.0f - 0.5f - 0.25f);          // -1 * 2, once
  EXPECT_FLOAT_EQ(l[5], 4.0f);                          // bias only
  EXPECT_FLOAT_EQ(l[6], 1.0f);                          // bias only
  EXPECT_EQ(l[7], -kInf);                               // banned (min_tokens)

  // vLLM order: logit_bias before the repetition penalty. 1 + 3 = 4, then / 2.
  SamplingParams q;
  q.repetition_penalty = 2.0f;
  q.logit_bias = {{0, 3.0f}};
  const std::vector<int32_t> seen = {0};
  SamplingContext c2{&q, seen, {}, {}};
  std::vector<float> m = {1.0f, 0.0f};
  s.ProcessLogits(m, c2);
  EXPECT_FLOAT_EQ(m[0], 2.0f);
  // No parameters: nothing changes.
  SamplingParams none;
  SamplingContext c3{&none, prompt, output, {}};
  std::vector<float> n = {1.0f, 4.0f, -2.0f, 6.0f, -1.0f, 1.0f, 2.0f, 9.0f};
  const std::vector<float> before = n;
  s.ProcessLogits(n, c3);
  EXPECT_EQ(n, before);
}

TEST(Sampler, BannedTokensAreNeverSampled) {
  Sampler s(4);
  SamplingParams p = Temp(0.0f);
  const std::vector<int32_t> banned = {2};
  SamplingContext ctx{&p, {}, {}, banned};
  EXPECT_EQ(s.Sample(std::vector<float>{0.0f, 1.0f, 9.0f, 2.0f}, ctx)->id, 3);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  Sampler s(100);
  std::mt19937 rng(3);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 40; ++i) rows.push_back(RandomRow(rng, 100));
  auto run = [&](uint64_t seed) {
    SamplingParams p = Temp(1.0f);
    std::vector<int32_t> out;
    for (const auto& row : rows) {
      SamplingContext ctx{&p, {}, out, {}, SequenceSeed(seed, 0)};
      out.push_back(s.Sample(row, ctx)->id);
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_NE(SequenceSeed(42, 0), SequenceSeed(42, 1));
}

TEST(Sampler, DrawFrequenciesMatchTheDistribution) {
  const std::vector<float> row = {2.0f, 1.0f, 0.0f, -1.0f, 0.5f};
  for (float temperature : {1.0f, 0.5f}) {
    Sampler s(5);
    SamplingParams p = Temp(temperature);
    std::vector<double> want(5);
    double z = 0;
    for (size_t i = 0; i < 5; ++i) z += want[i] = std::exp(row[i] / temperature);
    std::vector<int> counts(5, 0);
    const int draws = 20000;
    std::vector<int32_t> output;  // the draw index is the output length
    for (int d = 0; d < draws; ++d) {
      output.resize(static_cast<size_t>(d));
      SamplingContext ctx{&p, {}, output, {}, SequenceSeed(1234, 0)};
      ++counts[static_cast<size_t>(s.Sample(row, ctx)->id)];
    }
    for (size_t i = 0; i < 5; ++i) {
      const double q = want[i] / z;
      const double sigma = std::sqrt(q * (1 - q) / draws);
      EXPECT_NEAR(counts[i] / static_cast<double>(draws), q, 4 * sigma + 1e-4) << "token " << i << " T " << temperature;
    }
  }
}

TEST(Sampler, LogprobsAreRawLogSoftmaxBeforePenaltiesAndTemperature) {
  Sampler s(4);
  const std::vector<float> row = {1.0f, 3.0f, 2.0f, 0.0f};
  double z = 0;
  for (float v : row) z += std::exp(v);
  SamplingParams p = Temp(0.0f);
  p.logprobs = 2;
  p.logit_bias = {{3, 10.0f}};  // the sampled token is 3, which is not in the raw top 2
  p.repetition_penalty = 1.5f;
  const std::vector<int32_t> prompt = {1};
  SamplingContext ctx{&p, prompt, {}, {}};
  auto t = s.Sample(row, ctx);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->id, 3);
  EXPECT_NEAR(t->logprob, 0.0 - std::log(z), 1e-5);
  ASSERT_EQ(t->top_logprobs.size(), 2u);
  EXPECT_EQ(t->top_logprobs[0].id, 1);
  EXPECT_NEAR(t->top_logprobs[0].logprob, 3.0 - std::log(z), 1e-5);
  EXPECT_EQ(t->top_logprobs[1].id, 2);
  // logprobs = 0: the sampled token only.
  p.logprobs = 0;
  t = s.Sample(row, ctx);
  EXPECT_TRUE(t->top_logprobs.empty());
}

TEST(Sampler, RejectsBadRows) {
  Sampler s(3);
  SamplingParams p = Temp(0.0f);
  SamplingContext ctx{&p};
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 2.0f}, ctx).status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(s.Sample(std::vector<float>{1.0f, std::nanf(""), 0.0f}, ctx).ok());
  EXPECT_FALSE(s.Sample(std::vector<float>{-kInf, -kInf, -kInf}, ctx).ok());
  p.temperature = 1.0f;
  EXPECT_FALSE(s.Sample(std::vector<float>{-kInf, std::nanf(""), -kInf}, ctx).ok());
  auto all_masked = s.Sample(std::vector<float>{-kInf, -kInf, -kInf}, ctx);
  ASSERT_FALSE(all_masked.ok());
  EXPECT_NE(std::string(all_masked.status().message()).find("no finite value"), std::string::npos);
}

TEST(Sampler, UniformStreamIsSpreadOverTheUnitInterval) {
  std::vector<int> buckets(10, 0);
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = UniformAt(99, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++buckets[static_cast<size_t>(u * 10)];
  }
  for (int b : buckets) EXPECT_NEAR(b, 1000, 150);
}

}  // namespace
}  // namespace sparkserve::engine

namespace sparkserve::engine {
namespace {

// The (id, output count) pairs of prompt + output, counted afresh.
std::map<int32_t, int32_t> FreshCounts(const std::vector<int32_t>& prompt, const std::vector<int32_t>& output) {
  std::map<int32_t, int32_t> counts;
  for (int32_t id : prompt) counts.emplace(id, 0);
  for (int32_t id : output) ++counts[id];
  return counts;
}

std::map<int32_t, int32_t> AsMap(const PenaltyHistory& h) {
  std::map<int32_t, int32_t> m;
  EXPECT_EQ(h.ids().size(), h.output_counts().size());
  for (size_t i = 0; i < h.ids().size(); ++i) EXPECT_TRUE(m.emplace(h.ids()[i], h.output_counts()[i]).second);
  return m;
}

TEST(PenaltyHistory, GrowsDrawByDrawAsAFreshCount) {
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = {5, 9, 5, 2, 7, 9};
  std::vector<int32_t> output;
  PenaltyHistory h;
  for (int step = 0; step < 200; ++step) {
    h.Sync(prompt, output);
    ASSERT_EQ(AsMap(h), FreshCounts(prompt, output)) << "step " << step;
    output.push_back(static_cast<int32_t>(rng() % 40));
  }
}

TEST(PenaltyHistory, StartsOverWhenTheHistoryIsNotAnExtension) {
  PenaltyHistory h;
  h.Sync(std::vector<int32_t>{1, 2}, std::vector<int32_t>{3, 3, 4});
  EXPECT_EQ(AsMap(h), FreshCounts({1, 2}, {3, 3, 4}));
  h.Sync(std::vector<int32_t>{1, 2}, std::vector<int32_t>{3});  // output shorter: counted afresh
  EXPECT_EQ(AsMap(h), FreshCounts({1, 2}, {3}));
  h.Sync(std::vector<int32_t>{8}, std::vector<int32_t>{3, 8});  // another prompt
  EXPECT_EQ(AsMap(h), FreshCounts({8}, {3, 8}));
}

TEST(PenaltyHistory, RowSamplingFromTheHistoryEqualsAFreshOne) {
  scheduler::SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  const std::vector<int32_t> prompt = {4, 4, 11}, output = {11, 6, 6, 6};
  const SamplingContext ctx{&p, prompt, output, {}, 3};
  PenaltyHistory h;
  const model::RowSampling cached = ToRowSampling(ctx, &h), fresh = ToRowSampling(ctx);
  std::map<int32_t, int32_t> a, b;
  for (size_t i = 0; i < cached.history_ids.size(); ++i) a[cached.history_ids[i]] = cached.history_output_counts[i];
  for (size_t i = 0; i < fresh.history_ids.size(); ++i) b[fresh.history_ids[i]] = fresh.history_output_counts[i];
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, (std::map<int32_t, int32_t>{{4, 0}, {6, 3}, {11, 1}}));
  p.presence_penalty = 0.0f;
  p.repetition_penalty = 1.0f;  // no penalty: no history sent
  EXPECT_TRUE(ToRowSampling(ctx, &h).history_ids.empty());
}

}  // namespace
}  // namespace sparkserve::engine
