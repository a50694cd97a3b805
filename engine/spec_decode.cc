// SpecDecoder: per-step choice of k (fixed, or auto from acceptance and measured step costs).
#include "engine/spec_decode.h"

#include <algorithm>

namespace sparkserve::engine {

namespace {

constexpr double kPriorAcceptance = 0.5;  // before anything was drafted
constexpr double kGlobalWeight = 2.0;     // pseudo-drafts the prior is worth against all sequences' counts
constexpr double kSeqWeight = 4.0;        // pseudo-drafts the pooled rate is worth against a sequence's own
constexpr double kGlobalDecay = 0.995;    // the pooled counts forget: acceptance drifts with the traffic
constexpr double kMinGain = 1.02;         // drafts must promise 2% more tokens a second than none
constexpr int32_t kIdleSteps = 16;        // a sequence that did not draft for this many steps probes
constexpr double kRetireAfter = 4;        // MTP: after this many first drafts ...
constexpr double kRetireBelow = 0.2;      // ... accepted less often than this: MTP stops for the sequence

}  // namespace

std::string_view SpecModeName(SpecMode m) {
  switch (m) {
    case SpecMode::kOff: return "off";
    case SpecMode::kMtp: return "mtp";
    case SpecMode::kNgram: return "ngram";
  }
  return "?";
}

std::string_view SpecPolicyName(SpecPolicy p) { return p == SpecPolicy::kFixed ? "fixed" : "auto"; }

SpecDecoder::SpecDecoder(SpecConfig config, std::unique_ptr<Drafter> drafter,
                         std::function<bool(const scheduler::Sequence&)> may_draft)
    : config_(std::move(config)),
      drafter_(std::move(drafter)),
      may_draft_(std::move(may_draft)),
      global_tried_(static_cast<size_t>(config_.max_drafts), 0.0),
      global_accepted_(static_cast<size_t>(config_.max_drafts), 0.0) {
  counters_.accepted_per_pos.assign(static_cast<size_t>(config_.max_drafts), 0);
  for (const StepCostPoint& p : config_.fixed_costs) cost_.Observe(p.tokens, p.seconds);
}

double SpecDecoder::Rate(double accepted, double tried, double prior, double weight) {
  return (accepted + weight * prior) / (tried + weight);
}

void SpecDecoder::Plan(std::vector<scheduler::SpecCandidate>& candidates, int64_t step_tokens, int32_t budget) {
  std::vector<int32_t> proposal(candidates.size(), 0);
  for (size_t i = 0; i < candidates.size(); ++i) {
    scheduler::SpecCandidate& c = candidates[i];
    c.max_drafts = std::min(c.max_drafts, config_.max_drafts);
    if (!may_draft_(*c.seq)) {
      c.seq->mtp_off = true;  // it never drafts: no MTP work either
      continue;
    }
    if (mtp()) {
      proposal[i] = c.max_drafts;
    } else {
      c.drafts = drafter_->Propose(c.seq->tokens, c.max_drafts);
      proposal[i] = static_cast<int32_t>(c.drafts.size());
    }
  }
  if (config_.policy == SpecPolicy::kFixed) {
    for (size_t i = 0; i < candidates.size(); ++i) candidates[i].num_drafts = proposal[i];
    return;
  }
  ChooseAuto(candidates, proposal, step_tokens, budget);
  // Probes: a sequence that has not drafted for kIdleSteps drafts its whole proposal in the next
  // probe step (one step in kIdleSteps), so that acceptance it has never shown can be learnt and
  // the extra cost stays a small share of the steps.
  const bool probe_step = ++plan_calls_ % kIdleSteps == 0;
  // MTP sequences left idle for kIdleSteps while the pooled first-draft acceptance is this low are
  // retired instead of probed: the MTP work they keep paying every step (the KV fill) buys nothing,
  // and waiting for kRetireAfter probes cost more than the drafts (random weights on the H200:
  // 63% of --spec off's throughput at 64 users).
  const bool pool_fails =
      mtp() && Rate(global_accepted_[0], global_tried_[0], kPriorAcceptance, kGlobalWeight) < kRetireBelow;
  for (size_t i = 0; i < candidates.size(); ++i) {
    scheduler::SpecCandidate& c = candidates[i];
    if (proposal[i] == 0) continue;
    SeqStats& st = seqs_[c.seq->id];
    bool retire = false;
    if (c.num_drafts > 0) {
      st.idle_steps = 0;
    } else if (++st.idle_steps >= kIdleSteps) {
      if (pool_fails) {
        retire = true;
      } else if (probe_step) {
        c.num_drafts = proposal[i];
        st.idle_steps = 0;
      }
    }
    // MTP whose first draft keeps failing: no more drafts, and no more MTP work either.
    retire = retire || (mtp() && !st.tried.empty() && st.tried[0] >= kRetireAfter &&
                        st.accepted[0] < kRetireBelow * st.tried[0]);
    if (retire) {
      c.seq->mtp_off = true;
      c.num_drafts = 0;
    }
  }
}

void SpecDecoder::ChooseAuto(std::vector<scheduler::SpecCandidate>& candidates, const std::vector<int32_t>& proposal,
                             int64_t step_tokens, int32_t budget) {
  struct Increment {
    double survival;  // probability that this draft and every one before it hold
    size_t cand;
    int32_t k;        // the candidate's k with it
  };
  std::vector<Increment> incs;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (proposal[i] == 0) continue;
    const SeqStats& st = seqs_[candidates[i].seq->id];
    double survival = 1.0;
    for (int32_t j = 0; j < proposal[i]; ++j) {
      const auto J = static_cast<size_t>(j);
      const double prior = Rate(global_accepted_[J], global_tried_[J], kPriorAcceptance, kGlobalWeight);
      const double own_tried = J < st.tried.size() ? st.tried[J] : 0.0;
      const double own_accepted = J < st.accepted.size() ? st.accepted[J] : 0.0;
      survival *= Rate(own_accepted, own_tried, prior, kSeqWeight);
      incs.push_back({survival, i, j + 1});
    }
  }
  // Survival falls with the position, so taking increments best first keeps each k a prefix.
  std::stable_sort(incs.begin(), incs.end(),
                   [](const Increment& a, const Increment& b) { return a.survival > b.survival; });
  const double base_tokens = static_cast<double>(candidates.size());
  const double base = base_tokens / StepSeconds(step_tokens, false);
  double tokens = base_tokens, best = base;
  int32_t most_k = 0;
  size_t best_prefix = 0;
  const size_t n = std::min(incs.size(), static_cast<size_t>(std::max(budget, 0)));
  for (size_t m = 0; m < n; ++m) {
    tokens += incs[m].survival;
    most_k = std::max(most_k, incs[m].k);
    const double seconds = StepSeconds(step_tokens + static_cast<int64_t>(m) + 1, true) + draft_step_seconds_ * most_k;
    const double rate = tokens / seconds;
    if (rate > best) {
      best = rate;
      best_prefix = m + 1;
    }
  }
  if (best < base * kMinGain) return;
  for (size_t m = 0; m < best_prefix; ++m) {
    int32_t& k = candidates[incs[m].cand].num_drafts;
    k = std::max(k, incs[m].k);
  }
}

void SpecDecoder::Record(scheduler::SeqId id, int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  SeqStats& st = seqs_[id];
  const auto K = static_cast<size_t>(config_.max_drafts);
  st.tried.resize(K, 0.0);
  st.accepted.resize(K, 0.0);
  for (double& v : global_tried_) v *= kGlobalDecay;
  for (double& v : global_accepted_) v *= kGlobalDecay;
  for (int32_t j = 0; j < std::min(accepted + 1, drafted); ++j) {
    const auto J = static_cast<size_t>(j);
    st.tried[J] += 1.0;
    global_tried_[J] += 1.0;
    if (j < accepted) {
      st.accepted[J] += 1.0;
      global_accepted_[J] += 1.0;
      counters_.accepted_per_pos[J]++;
    }
  }
  counters_.num_drafts++;
  counters_.num_draft_tokens += drafted;
  counters_.num_accepted_tokens += accepted;
}

void SpecDecoder::ObserveStep(int64_t tokens, int32_t max_drafts, double seconds) {
  if (!config_.fixed_costs.empty()) return;
  if (max_drafts == 0) {
    cost_.Observe(tokens, seconds);
  } else {
    verify_cost_.Observe(tokens, seconds - draft_step_seconds_ * max_drafts);
  }
}

double SpecDecoder::StepSeconds(int64_t tokens, bool verify) const {
  return verify && !verify_cost_.empty() ? verify_cost_.Cost(tokens) : cost_.Cost(tokens);
}

}  // namespace sparkserve::engine
