// SpecDecoder: the engine's speculative decoding policy (scheduler::DraftPlanner). It chooses each
// decode's k for the step from the sequence's running acceptance per draft position and the
// measured step cost curve, maximising the step's expected tokens per second (k = 0 everywhere
// when drafting does not pay, but for rare probes; an MTP sequence whose first drafts keep failing
// also stops its MTP work). With `fixed` it
// drafts K wherever the drafter has a guess. It keeps the acceptance counters behind the metrics.
//
// Acceptance (engine.cc): the drafts are deterministic (greedy MTP, n-gram lookup): a one-hot
// proposal q. Speculative rejection sampling then accepts draft x with probability p(x) and
// otherwise draws from p with x removed, renormalised; that is exactly "draw y from p as plain
// decoding would (same uniform: the draw's index in the output), accept iff y == x, else emit y".
// So every verify column is sampled by the plain sampler, and output keeps plain decoding's
// distribution (and its tokens for greedy and seeded requests).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/drafter.h"
#include "engine/step_cost.h"
#include "scheduler/scheduler.h"

namespace sparkserve::engine {

enum class SpecMode : uint8_t { kOff, kMtp, kNgram };
enum class SpecPolicy : uint8_t { kAuto, kFixed };

std::string_view SpecModeName(SpecMode m);      // "off" | "mtp" | "ngram"
std::string_view SpecPolicyName(SpecPolicy p);  // "auto" | "fixed"

inline constexpr int32_t kMaxSpecTokens = 8;

struct SpecConfig {
  SpecMode mode = SpecMode::kOff;
  int32_t max_drafts = 3;  // K, 1..kMaxSpecTokens
  SpecPolicy policy = SpecPolicy::kAuto;
  // Replaces the mode's drafter with one drafting on the host (tests: replay, random).
  std::shared_ptr<Drafter> drafter;
  // auto: measure the step cost curve at start-up (else it is learnt from the steps alone).
  bool measure_at_start = true;
  // auto: a given step cost curve (seconds by tokens fed), neither measured nor learnt: tests that
  // must not depend on the machine's load.
  std::vector<StepCostPoint> fixed_costs;
};

// Speculation counters (vLLM's spec_decode_* names): verify windows, drafted tokens, accepted
// drafts, and accepted drafts per position.
struct SpecCounters {
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_pos;
};

class SpecDecoder : public scheduler::DraftPlanner {
 public:
  // `may_draft`: false for sequences that must not speculate (constrained outputs).
  SpecDecoder(SpecConfig config, std::unique_ptr<Drafter> drafter,
              std::function<bool(const scheduler::Sequence&)> may_draft);

  void Plan(std::vector<scheduler::SpecCandidate>& candidates, int64_t step_tokens, int32_t budget) override;

  // After a verify window: `drafted` drafts, the first `accepted` of them held.
  void Record(scheduler::SeqId id, int32_t drafted, int32_t accepted);
  // A step of `tokens` fed (drafts included) whose largest verify window had `max_drafts` drafts
  // took `seconds`. Steps with verify windows have a curve of their own: they may cost more than
  // their token count says (per-column GDN state, every column's logits).
  void ObserveStep(int64_t tokens, int32_t max_drafts, double seconds);
  void Forget(scheduler::SeqId id) { seqs_.erase(id); }

  StepCostCurve& cost_curve() { return cost_; }
  const StepCostCurve& verify_cost_curve() const { return verify_cost_; }
  // Seconds of a step of `tokens` with (verify) or without verify windows.
  double StepSeconds(int64_t tokens, bool verify) const;
  void set_draft_step_seconds(double s) { draft_step_seconds_ = s; }
  const SpecCounters& counters() const { return counters_; }
  const SpecConfig& config() const { return config_; }
  bool mtp() const { return drafter_->on_runner(); }

  // Acceptance of a position given the earlier ones held: (accepted + w * prior) / (tried + w).
  static double Rate(double accepted, double tried, double prior, double weight);

 private:
  struct SeqStats {
    std::vector<double> tried, accepted;  // per draft position
    int32_t idle_steps = 0;               // decode steps in a row it did not draft
  };
  // Chooses k per candidate (auto), given each one's proposal length.
  void ChooseAuto(std::vector<scheduler::SpecCandidate>& candidates, const std::vector<int32_t>& proposal,
                  int64_t step_tokens, int32_t budget);

  SpecConfig config_;
  std::unique_ptr<Drafter> drafter_;
  std::function<bool(const scheduler::Sequence&)> may_draft_;
  std::unordered_map<scheduler::SeqId, SeqStats> seqs_;
  std::vector<double> global_tried_, global_accepted_;  // all sequences, decaying
  StepCostCurve cost_;         // steps without verify windows (start-up measurement, then every step)
  StepCostCurve verify_cost_;  // steps with verify windows (empty: as cost_)
  double draft_step_seconds_ = 0.0;  // one MTP draft step (0: host drafter)
  int64_t plan_calls_ = 0;
  SpecCounters counters_;
};

}  // namespace sparkserve::engine
