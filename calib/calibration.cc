// Calibration and evaluation passes (see calibration.h).
#include "calib/calibration.h"

#include <cmath>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cpu/ops.h"

namespace sparkserve::calib {

using model::ActivationObserver;
using model::LogitsWanted;
using model::SeqWork;
using model::StepOutput;
using model::StepPlan;
using model::cpu::CpuModelRunner;
using model::cpu::CpuRunnerOptions;

namespace {

SeqWork OneSequence(std::span<const int32_t> ids, int32_t page_size) {
  SeqWork s;
  s.slot = 0;
  s.start_pos = 0;
  s.tokens.assign(ids.begin(), ids.end());
  const int64_t pages = (static_cast<int64_t>(ids.size()) + page_size - 1) / page_size;
  for (int32_t p = 0; p < pages; ++p) s.kv_pages.push_back(p);
  s.logits = LogitsWanted::kAll;
  return s;
}

// Detaches the observer however the pass ends.
struct ObserverAttachment {
  CpuModelRunner& runner;
  ObserverAttachment(CpuModelRunner& r, ActivationObserver* o) : runner(r) { runner.set_activation_observer(o); }
  ~ObserverAttachment() { runner.set_activation_observer(nullptr); }
};

}  // namespace

CpuRunnerOptions SingleSequenceRunnerOptions(int32_t max_tokens) {
  CpuRunnerOptions o;
  o.state.num_slots = 1;
  o.state.kv_page_size = 16;
  o.state.num_kv_pages = std::max<int32_t>(1, (max_tokens + 15) / 16);
  o.state.max_verify_tokens = 1;
  o.max_seq_len = std::max<int32_t>(1, max_tokens);
  return o;
}

absl::Status ObserveSamples(CpuModelRunner& runner, const std::vector<std::vector<int32_t>>& samples,
                            ActivationObserver& observer) {
  ObserverAttachment attach(runner, &observer);
  const int32_t page = runner.capacity().kv_page_size;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& ids = samples[i];
    if (ids.empty()) continue;
    StepPlan plan;
    plan.seqs.push_back(OneSequence(ids, page));
    auto out = runner.Run(plan);
    if (!out.ok()) return core::Annotate(out.status(), fmt::format("calibration sample {}", i));
    if (!runner.has_mtp() || ids.size() < 2) continue;
    // The MTP block over the sample: position p takes ids[p + 1] and the target's hidden at p.
    model::StepPlan mtp;
    model::DraftWork& m = mtp.drafts.emplace_back();
    m.slot = 0;
    m.start_pos = 0;
    m.tokens.assign(ids.begin() + 1, ids.end());
    m.hidden_row = 0;
    m.kv_pages = plan.seqs[0].kv_pages;
    m.logits = LogitsWanted::kAll;  // the shared lm_head observes the MTP's rows too, as drafting feeds it
    auto mo = runner.Run(mtp);
    if (!mo.ok()) return core::Annotate(mo.status(), fmt::format("calibration sample {} (MTP)", i));
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Tensor> SampleLogProbs(CpuModelRunner& runner, std::span<const int32_t> ids) {
  if (ids.empty()) return absl::InvalidArgumentError("empty sample");
  StepPlan plan;
  plan.seqs.push_back(OneSequence(ids, runner.capacity().kv_page_size));
  ASSIGN_OR_RETURN(StepOutput out, runner.Run(plan));
  const int64_t rows = out.logits.shape()[0], V = out.logits.shape()[1];
  float* p = out.logits.data<float>();
  for (int64_t r = 0; r < rows; ++r) kernels::cpu::LogSoftmax(p + r * V, V, p + r * V);
  return std::move(out.logits);
}

absl::StatusOr<LogitAgreement> CompareLogProbs(const core::Tensor& reference, const core::Tensor& test) {
  if (reference.shape() != test.shape() || reference.shape().size() != 2 || reference.dtype() != core::DType::kF32 ||
      test.dtype() != core::DType::kF32) {
    return absl::InvalidArgumentError("CompareLogProbs: the two log-probability tensors must be f32 [n, vocab] alike");
  }
  const int64_t rows = reference.shape()[0], V = reference.shape()[1];
  LogitAgreement a;
  for (int64_t r = 0; r < rows; ++r) {
    const float* lp = reference.data<float>() + r * V;
    const float* lq = test.data<float>() + r * V;
    double kl = 0;
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(static_cast<double>(lp[j]));
      if (p > 0) kl += p * (static_cast<double>(lp[j]) - static_cast<double>(lq[j]));
    }
    a.kl_sum += std::max(kl, 0.0);  // exact 0 for identical rows; tiny negative rounding clamped
    a.top1_same += kernels::cpu::Argmax(lp, V) == kernels::cpu::Argmax(lq, V) ? 1 : 0;
    ++a.positions;
  }
  return a;
}

quant::CalibrationScales ScalesFromObserver(const model::AbsMaxObserver& observer) {
  quant::CalibrationScales s;
  s.input_amax = observer.input_amax();
  s.kv_amax = observer.kv_amax();
  return s;
}

}  // namespace sparkserve::calib
