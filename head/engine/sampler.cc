// Sampler: logits processing, truncation (min_p, top_k, top_p), the draw and raw logprobs.
#include "head/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fmt/format.h"

namespace sparkserve::head {
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

double UniformAt(uint64_t seed, uint64_t counter) {
  const uint64_t z = SplitMix64(seed + 0x9E3779B97F4A7C15ull * (counter + 1));
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size),
      processed_(static_cast<size_t>(vocab_size)),
      seen_epoch_(static_cast<size_t>(vocab_size), 0),
      counts_(static_cast<size_t>(vocab_size), 0) {}

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
  float max_logit = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) {
      return absl::InternalError(fmt::format("the model produced NaN logits (token {})", i));
    }
    max_logit = std::max(max_logit, logits[i]);
  }
  if (!std::isfinite(max_logit)) return NoFiniteLogit();

  // Weights relative to the most probable token (whose weight is 1), so min_p compares directly.
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  std::vector<TokenProb> kept;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kNegInf) continue;
    const double w = std::exp((static_cast<double>(logits[i]) - max_logit) * inv_t);
    if (w <= 0.0 || w < static_cast<double>(params.min_p)) continue;
    kept.push_back({static_cast<int32_t>(i), w});
  }
  bool sorted = false;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < kept.size()) {
    std::nth_element(kept.begin(), kept.begin() + (params.top_k - 1), kept.end(), Better);
    kept.resize(static_cast<size_t>(params.top_k));
    std::sort(kept.begin(), kept.end(), Better);
    sorted = true;
  }
  if (params.top_p < 1.0f) {
    double total = 0.0;
    for (const auto& t : kept) total += t.prob;
    const double limit = (static_cast<double>(params.top_p) - 1e-6) * total;
    // Sort only as far as the cut needs: the head of a peaked distribution holds most of the mass.
    size_t m = std::min<size_t>(kept.size(), 256);
    size_t keep = kept.size();
    for (;;) {
      if (!sorted) std::partial_sort(kept.begin(), kept.begin() + m, kept.end(), Better);
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
    sorted = true;
  }
  double total = 0.0;
  for (const auto& t : kept) total += t.prob;
  for (auto& t : kept) t.prob /= total;
  return kept;
}

absl::StatusOr<SampledToken> Sampler::Sample(std::span<const float> logits, const SamplingContext& ctx) {
  if (static_cast<int32_t>(logits.size()) != vocab_size_) {
    return absl::InternalError(
        fmt::format("logits row has {} entries, the vocabulary {}", logits.size(), vocab_size_));
  }
  const scheduler::SamplingParams& p = *ctx.params;
  processed_.assign(logits.begin(), logits.end());
  ProcessLogits(processed_, ctx);

  SampledToken out;
  if (p.temperature < kGreedyTemperature) {
    auto id = Argmax(processed_);
    if (!id.ok()) return id.status();
    out.id = *id;
  } else {
    auto dist = Truncate(processed_, p);
    if (!dist.ok()) return dist.status();
    if (dist->empty()) return NoFiniteLogit();
    const double u = UniformAt(ctx.rng_seed, ctx.output.size());
    double cum = 0.0;
    out.id = dist->back().id;  // rounding fallback
    for (const TokenProb& t : *dist) {
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
    for (float v : logits) sum += std::exp(static_cast<double>(v) - max_logit);
    const float lse = max_logit + static_cast<float>(std::log(sum));
    out.logprob = logits[static_cast<size_t>(out.id)] - lse;
    out.top_logprobs = TopLogprobs(logits, std::min(p.logprobs, kMaxLogprobs), lse);
  }
  return out;
}

}  // namespace sparkserve::head
