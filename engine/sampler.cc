// Sampler: logits processing, truncation (min_p, top_k, top_p), the draw and raw logprobs.
#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Best first; equal weights: lower id first (deterministic everywhere).
bool Better(const TokenProb& a, const TokenProb& b) {
  return a.prob > b.prob || (a.prob == b.prob && a.id < b.id);
}

// Weights are in (0, 1]: band b holds weights in [2^-b, 2^-(b-1)), the last band everything below.
// A lower band only holds larger weights than a higher one.
constexpr size_t kWeightBands = 160;
size_t WeightBand(double w) {
  const int exponent = static_cast<int>((std::bit_cast<uint64_t>(w) >> 52) & 0x7FF) - 1023;  // floor(log2 w)
  return static_cast<size_t>(std::clamp(-exponent, 0, static_cast<int>(kWeightBands) - 1));
}

absl::Status NoFiniteLogit() {
  return absl::InternalError("the logits row has no finite value left to sample from");
}

// Index of the largest logit (lowest id on ties); error on NaN or no finite value.
absl::StatusOr<int32_t> Argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_value = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v)) return absl::InternalError(fmt::format("the model produced NaN logits (token {})", i));
    if (v > best_value) {
      best_value = v;
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0) return NoFiniteLogit();
  return best;
}

// The k largest raw logits as log-softmax values, best first (lower id on ties).
std::vector<scheduler::TokenLogprob> TopLogprobs(std::span<const float> logits, int32_t k, float lse) {
  std::vector<scheduler::TokenLogprob> top;
  if (k <= 0) return top;
  top.reserve(static_cast<size_t>(k) + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (static_cast<int32_t>(top.size()) == k && !(v > top.back().logprob)) continue;
    auto at = std::upper_bound(top.begin(), top.end(), v,
                               [](float x, const scheduler::TokenLogprob& t) { return x > t.logprob; });
    top.insert(at, {static_cast<int32_t>(i), v});
    if (static_cast<int32_t>(top.size()) > k) top.pop_back();
  }
  for (auto& t : top) t.logprob -= lse;
  return top;
}

}  // namespace

uint64_t SequenceSeed(uint64_t request_seed, int32_t sample_index) {
  return SplitMix64(request_seed ^ SplitMix64(0x5EEDull + static_cast<uint64_t>(sample_index)));
}

void PenaltyHistory::Sync(std::span<const int32_t> prompt, std::span<const int32_t> output) {
  if (!started_ || prompt.size() != prompt_size_ || output.size() < output_size_) {
    ids_.clear();
    counts_.clear();
    index_.clear();
    for (const int32_t id : prompt) {
      if (index_.emplace(id, ids_.size()).second) {
        ids_.push_back(id);
        counts_.push_back(0);
      }
    }
    prompt_size_ = prompt.size();
    output_size_ = 0;
    started_ = true;
  }
  for (size_t i = output_size_; i < output.size(); ++i) {
    const auto [it, added] = index_.emplace(output[i], ids_.size());
    if (added) {
      ids_.push_back(output[i]);
      counts_.push_back(0);
    }
    ++counts_[it->second];
  }
  output_size_ = output.size();
}

model::RowSampling ToRowSampling(const SamplingContext& ctx, PenaltyHistory* history) {
  const scheduler::SamplingParams& p = *ctx.params;
  model::RowSampling r;
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.presence_penalty = p.presence_penalty;
  r.num_logprobs = std::min(p.logprobs, kMaxLogprobs);
  r.uniform = UniformAt(ctx.rng_seed, ctx.output.size());
  r.banned.assign(ctx.banned.begin(), ctx.banned.end());
  for (const auto& [id, b] : p.logit_bias) r.bias.emplace_back(id, b);
  if ((p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && history) {
    history->Sync(ctx.prompt, ctx.output);
    r.history_ids = history->ids();
    r.history_output_counts = history->output_counts();
  } else if (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    std::map<int32_t, int32_t> counts;  // id -> occurrences in the output (0: prompt only)
    for (const int32_t id : ctx.prompt) counts.emplace(id, 0);
    for (const int32_t id : ctx.output) ++counts[id];
    for (const auto& [id, c] : counts) {
      r.history_ids.push_back(id);
      r.history_output_counts.push_back(c);
    }
  }
  return r;
}

double UniformAt(uint64_t seed, uint64_t counter) {
  const uint64_t z = SplitMix64(seed + 0x9E3779B97F4A7C15ull * (counter + 1));
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size),
      processed_(static_cast<size_t>(vocab_size)),
      seen_epoch_(static_cast<size_t>(vocab_size), 0),
      counts_(static_cast<size_t>(vocab_size), 0) {
  kept_.reserve(static_cast<size_t>(vocab_size));
}

void Sampler::ProcessLogits(std::span<float> logits, const SamplingContext& ctx) {
  const scheduler::SamplingParams& p = *ctx.params;
  const auto in_vocab = [&](int32_t id) { return id >= 0 && id < static_cast<int32_t>(logits.size()); };
  for (int32_t id : ctx.banned) {
    if (in_vocab(id)) logits[static_cast<size_t>(id)] = kNegInf;
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (in_vocab(id)) logits[static_cast<size_t>(id)] += bias;
  }
  if (p.repetition_penalty != 1.0f) {
    if (++epoch_ == 0) {  // wrapped: old marks could alias the new epoch
      std::fill(seen_epoch_.begin(), seen_epoch_.end(), 0);
      epoch_ = 1;
    }
    const float r = p.repetition_penalty;
    for (auto history : {ctx.prompt, ctx.output}) {
      for (int32_t id : history) {
        if (!in_vocab(id) || seen_epoch_[static_cast<size_t>(id)] == epoch_) continue;
        seen_epoch_[static_cast<size_t>(id)] = epoch_;
        float& l = logits[static_cast<size_t>(id)];
        l = l > 0.0f ? l / r : l * r;
      }
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (int32_t id : ctx.output) {
      if (in_vocab(id)) ++counts_[static_cast<size_t>(id)];
    }
    for (int32_t id : ctx.output) {
      if (!in_vocab(id)) continue;
      int32_t& c = counts_[static_cast<size_t>(id)];
      if (c == 0) continue;  // already applied
      logits[static_cast<size_t>(id)] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
      c = 0;
    }
  }
}

absl::StatusOr<std::vector<TokenProb>> Sampler::Truncate(std::span<const float> logits,
                                                         const scheduler::SamplingParams& params) {
  RETURN_IF_ERROR(BuildDistribution(logits, params));
  return kept_;
}

absl::Status Sampler::BuildDistribution(std::span<const float> logits,
                                        const scheduler::SamplingParams& params) {
  float max_logit = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return absl::InternalError(fmt::format("the model produced NaN logits (token {})", i));
    }
    max_logit = std::max(max_logit, logits[i]);
  }
  if (!std::isfinite(max_logit)) return NoFiniteLogit();

  // Candidates hold logits first, weights (relative to the best token's 1) after. Every filter
  // keeps a best-first prefix, so top_k can select by logit before any exp, and min_p (w >= min_p,
  // i.e. (l - max) / T >= ln min_p) is a logit threshold.
  const float inv_t = 1.0f / params.temperature;
  const float min_logit = params.min_p > 0.0f ? max_logit + std::log(params.min_p) * params.temperature : kNegInf;
  std::vector<TokenProb>& kept = kept_;
  kept.clear();
  bool sorted = false;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < logits.size()) {
    const size_t k = static_cast<size_t>(params.top_k);
    // Heap ordered by Better: its front is the worst of the k best so far.
    for (size_t i = 0; i < logits.size(); ++i) {
      const float l = logits[i];
      if (l == kNegInf || l < min_logit) continue;
      const TokenProb t{static_cast<int32_t>(i), l};
      if (kept.size() < k) {
        kept.push_back(t);
        std::push_heap(kept.begin(), kept.end(), Better);
      } else if (Better(t, kept.front())) {
        std::pop_heap(kept.begin(), kept.end(), Better);
        kept.back() = t;
        std::push_heap(kept.begin(), kept.end(), Better);
      }
    }
    std::sort(kept.begin(), kept.end(), Better);
    sorted = true;
    for (TokenProb& t : kept) t.prob = std::exp((static_cast<float>(t.prob) - max_logit) * inv_t);
  } else {
    for (size_t i = 0; i < logits.size(); ++i) {
      const float l = logits[i];
      if (l == kNegInf || l < min_logit) continue;
      kept.push_back({static_cast<int32_t>(i), std::exp((l - max_logit) * inv_t)});
    }
  }
  // exp may underflow far in the tail: such tokens cannot be drawn.
  kept.erase(std::remove_if(kept.begin(), kept.end(), [](const TokenProb& t) { return !(t.prob > 0.0); }),
             kept.end());
  if (kept.empty()) return NoFiniteLogit();

  if (params.top_p < 1.0f) {
    double total = 0.0;
    for (const auto& t : kept) total += t.prob;
    const double limit = (static_cast<double>(params.top_p) - 1e-6) * total;
    if (!sorted) {
      // Mass per power-of-two band of weight, best band first: every band before the one where the
      // mass reaches the limit is kept whole, every band after it is cut, so only that band's tokens
      // need ordering. A peaked distribution leaves a few hundred tokens of 248k to sort.
      std::array<double, kWeightBands> band_mass{};
      for (const auto& t : kept) band_mass[WeightBand(t.prob)] += t.prob;
      size_t cut_band = kWeightBands - 1;
      double mass = 0.0;
      for (size_t b = 0; b < kWeightBands; ++b) {
        mass += band_mass[b];
        if (mass >= limit) {
          cut_band = b;
          break;
        }
      }
      kept.erase(std::remove_if(kept.begin(), kept.end(),
                                [&](const TokenProb& t) { return WeightBand(t.prob) > cut_band; }),
                 kept.end());
      std::sort(kept.begin(), kept.end(), Better);
      sorted = true;
    }
    // Sort only as far as the cut needs: the head of a peaked distribution holds most of the mass.
    size_t m = std::min<size_t>(kept.size(), 256);
    size_t keep = kept.size();
    for (;;) {
      if (!sorted) std::partial_sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(m), kept.end(), Better);
      double before = 0.0;  // mass of the tokens more probable than kept[j]
      size_t j = 0;
      for (; j < m; ++j) {
        if (j > 0 && before >= limit) break;
        before += kept[j].prob;
      }
      if (j < m || m == kept.size()) {
        keep = j;
        break;
      }
      m = std::min(kept.size(), m * 8);
    }
    kept.resize(keep);
  }
  double total = 0.0;
  for (const auto& t : kept) total += t.prob;
  for (auto& t : kept) t.prob /= total;
  return absl::OkStatus();
}

absl::StatusOr<SampledToken> Sampler::Sample(std::span<const float> logits, const SamplingContext& ctx) {
  if (static_cast<int32_t>(logits.size()) != vocab_size_) {
    return absl::InternalError(
        fmt::format("logits row has {} entries, the vocabulary {}", logits.size(), vocab_size_));
  }
  const scheduler::SamplingParams& p = *ctx.params;
  if (!ctx.allowed.empty()) {  // the mask comes first: everything after sees only allowed tokens
    if (ctx.allowed.size() * 32 < logits.size()) {
      return absl::InternalError(fmt::format("token mask of {} words for a row of {}", ctx.allowed.size(), logits.size()));
    }
    masked_.assign(logits.begin(), logits.end());
    for (size_t w = 0; w * 32 < masked_.size(); ++w) {
      const uint32_t word = ctx.allowed[w];
      if (word == 0xFFFFFFFFu) continue;
      const size_t end = std::min(masked_.size(), w * 32 + 32);
      for (size_t i = w * 32; i < end; ++i) {
        if (!((word >> (i - w * 32)) & 1u)) masked_[i] = kNegInf;
      }
    }
    logits = masked_;
  }
  const bool changes_logits = !ctx.banned.empty() || !p.logit_bias.empty() || p.repetition_penalty != 1.0f ||
                              p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  std::span<const float> processed = logits;
  if (changes_logits) {
    processed_.assign(logits.begin(), logits.end());
    ProcessLogits(processed_, ctx);
    processed = processed_;
  }

  SampledToken out;
  if (p.temperature < kGreedyTemperature) {
    auto id = Argmax(processed);
    if (!id.ok()) return id.status();
    out.id = *id;
  } else {
    RETURN_IF_ERROR(BuildDistribution(processed, p));
    const double u = UniformAt(ctx.rng_seed, ctx.output.size());
    double cum = 0.0;
    out.id = kept_.back().id;  // rounding fallback
    for (const TokenProb& t : kept_) {
      cum += t.prob;
      if (u < cum) {
        out.id = t.id;
        break;
      }
    }
  }

  if (p.logprobs >= 0) {
    float max_logit = kNegInf;
    for (float v : logits) max_logit = std::max(max_logit, v);
    double sum = 0.0;
    for (float v : logits) sum += std::exp(v - max_logit);
    const float lse = max_logit + static_cast<float>(std::log(sum));
    out.logprob = logits[static_cast<size_t>(out.id)] - lse;
    out.top_logprobs = TopLogprobs(logits, std::min(p.logprobs, kMaxLogprobs), lse);
  }
  return out;
}

}  // namespace sparkserve::engine
