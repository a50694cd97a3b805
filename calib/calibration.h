// Calibration and evaluation passes over token samples on a CpuModelRunner: activation statistics
// (AbsMaxObserver over the text model and the MTP block) turned into the quantizer's
// CalibrationScales, per-position log-probabilities of a sample, and the KL divergence / top-1
// agreement of two models' final logits.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/activation_observer.h"
#include "model/cpu/cpu_model_runner.h"
#include "quant/quantizer/quantize_pipeline.h"

namespace sparkserve::calib {

// Runner options for one sequence of up to `max_tokens` tokens at a time (slot 0).
model::cpu::CpuRunnerOptions SingleSequenceRunnerOptions(int32_t max_tokens);

// Runs each sample (slot 0, from position 0, every row's logits) through `runner` with `observer`
// attached; when the runner has an MTP block, also runs it over the sample (token i+1 with the
// target's hidden at i) so its modules are observed. Detaches the observer before returning.
absl::Status ObserveSamples(model::cpu::CpuModelRunner& runner, const std::vector<std::vector<int32_t>>& samples,
                            model::ActivationObserver& observer);

// Log-softmax of the final logits of every position of `ids` (slot 0, from position 0): f32 [n, vocab].
absl::StatusOr<core::Tensor> SampleLogProbs(model::cpu::CpuModelRunner& runner, std::span<const int32_t> ids);

struct LogitAgreement {
  double kl_sum = 0;       // sum over positions of KL(reference || test), nats
  int64_t top1_same = 0;   // positions whose argmax agrees
  int64_t positions = 0;
  double mean_kl() const { return positions ? kl_sum / static_cast<double>(positions) : 0.0; }
  double top1() const { return positions ? static_cast<double>(top1_same) / static_cast<double>(positions) : 0.0; }
  void Add(const LogitAgreement& o) {
    kl_sum += o.kl_sum;
    top1_same += o.top1_same;
    positions += o.positions;
  }
};

// Compares two [n, vocab] log-softmax tensors row by row. Fails when the shapes differ.
absl::StatusOr<LogitAgreement> CompareLogProbs(const core::Tensor& reference, const core::Tensor& test);

// The quantizer's calibration input from observed maxima: every observed Linear input amax, and
// every observed attention's {amax k, amax v}.
quant::CalibrationScales ScalesFromObserver(const model::AbsMaxObserver& observer);

}  // namespace sparkserve::calib
