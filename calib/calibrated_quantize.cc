// Calibrated quantisation and source-vs-quantised evaluation (see calibrated_quantize.h).
#include "calib/calibrated_quantize.h"

#include <chrono>
#include <memory>

#include "core/status.h"
#include "fmt/format.h"
#include "calib/calibration_corpus.h"
#include "calib/activation_fake_quant.h"
#include "model/config.h"
#include "model/cpu/cpu_model_loader.h"
#include "quant/quantizer/quantize_checkpoint.h"
#include "spdlog/spdlog.h"

namespace sparkserve::calib {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

absl::StatusOr<CalibratedQuantizeResult> CalibrateAndQuantize(const std::string& in_dir, const std::string& out_dir,
                                                              const quant::Recipe& recipe,
                                                              quant::QuantizeOptions options,
                                                              const CalibrationOptions& calib) {
  CalibratedQuantizeResult r;
  auto warn = [&r](std::string w) {
    spdlog::warn("quantize: {}", w);
    r.warnings.push_back(std::move(w));
  };
  if (calib.samples < 1) return absl::InvalidArgumentError("--calib-samples must be at least 1");
  if (calib.eval_samples < 0) return absl::InvalidArgumentError("--eval-samples must not be negative");
  if (calib.max_tokens < 2 || calib.eval_max_tokens < 2)
    return absl::InvalidArgumentError("calibration samples need at least 2 tokens");
  options.calibration = {};
  {  // fail on an unusable output directory before the (long) calibration
    ASSIGN_OR_RETURN(quant::OutputDirectory probe, quant::OutputDirectory::Begin(out_dir));
  }
  std::vector<std::vector<int32_t>> held_out;
  std::vector<core::Tensor> reference;  // source log-probabilities of held_out, f32 [n, vocab]
  const bool need_source = calib.calibrate || (calib.evaluate && calib.eval_samples > 0);
  if (need_source) {
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(model::Qwen35Config config, model::LoadQwen35Config(in_dir));
    // ---- samples ----
    std::vector<CalibrationText> texts;
    if (calib.calib_file.empty()) {
      texts = BuiltInCalibrationTexts();
    } else {
      ASSIGN_OR_RETURN(texts, LoadCalibrationFile(calib.calib_file));
    }
    const size_t wanted = static_cast<size_t>(calib.samples) + static_cast<size_t>(calib.evaluate ? calib.eval_samples : 0);
    if (texts.size() > wanted) texts.resize(wanted);
    TokenizeOptions topt;
    topt.max_tokens = calib.max_tokens;
    topt.vocab_size = config.vocab_size;
    topt.seed = calib.seed;
    ASSIGN_OR_RETURN(TokenizedSamples tokenized, TokenizeCalibrationTexts(in_dir, texts, topt));
    for (std::string& w : tokenized.warnings) warn(std::move(w));
    r.random_ids = tokenized.random_ids;
    std::vector<std::vector<int32_t>>& all = tokenized.samples;
    size_t n_eval = 0;
    if (calib.evaluate && calib.eval_samples > 0) {
      n_eval = std::min<size_t>(static_cast<size_t>(calib.eval_samples), all.size() > 1 ? all.size() - 1 : 0);
      if (n_eval == 0) {
        warn("only one calibration sample: no held-out sample left, evaluation skipped");
      } else if (n_eval < static_cast<size_t>(calib.eval_samples)) {
        warn(fmt::format("only {} samples: {} held out for evaluation", all.size(), n_eval));
      }
    }
    held_out.assign(all.end() - static_cast<std::ptrdiff_t>(n_eval), all.end());
    all.resize(all.size() - n_eval);
    if (calib.calibrate && all.size() < static_cast<size_t>(calib.samples)) {
      warn(fmt::format("--calib-samples {}: the corpus gives only {} calibration samples", calib.samples, all.size()));
    }
    for (auto& h : held_out) {
      if (static_cast<int64_t>(h.size()) > calib.eval_max_tokens) h.resize(static_cast<size_t>(calib.eval_max_tokens));
    }
    // ---- the source model (f32) ----
    int32_t longest = 2;
    for (const auto& s : all) longest = std::max<int32_t>(longest, static_cast<int32_t>(s.size()));
    for (const auto& s : held_out) longest = std::max<int32_t>(longest, static_cast<int32_t>(s.size()));
    spdlog::info("quantize: loading the source model (f32) for {}", calib.calibrate ? "calibration" : "evaluation");
    ASSIGN_OR_RETURN(std::unique_ptr<model::cpu::CpuModelRunner> source,
                     model::cpu::LoadCpuModel(in_dir, calib::SingleSequenceRunnerOptions(longest)));
    if (calib.calibrate) {
      model::AbsMaxObserver observer;
      RETURN_IF_ERROR(calib::ObserveSamples(*source, all, observer));
      r.scales = calib::ScalesFromObserver(observer);
      options.calibration = r.scales;
      r.calib_samples = static_cast<int32_t>(all.size());
      for (const auto& s : all) r.calib_tokens += static_cast<int64_t>(s.size());
    }
    for (const auto& h : held_out) {
      ASSIGN_OR_RETURN(core::Tensor lp, calib::SampleLogProbs(*source, h));
      reference.push_back(std::move(lp));
    }
    source.reset();  // free the f32 source before quantising and loading the output
    r.calib_seconds = Since(t0);
    if (calib.calibrate) {
      spdlog::info("quantize: calibrated on {} samples ({} tokens) in {:.1f} s", r.calib_samples, r.calib_tokens,
                   r.calib_seconds);
    }
  }
  ASSIGN_OR_RETURN(r.report, quant::QuantizeCheckpoint(in_dir, out_dir, recipe, options));
  for (const quant::ModuleReport& m : r.report.modules) {
    if (m.scheme == quant::WeightScheme::kNvfp4 && r.scales.input_amax.count(m.name)) ++r.w4a4_modules;
  }
  size_t nvfp4 = 0;
  for (const quant::ModuleReport& m : r.report.modules) nvfp4 += m.scheme == quant::WeightScheme::kNvfp4;
  if (r.w4a4_modules != nvfp4) r.w4a4_modules = 0;  // the pipeline writes W4A4 only when every module has a scale
  r.kv_layers = r.scales.kv_amax.size();
  if (!held_out.empty()) {
    const auto t0 = Clock::now();
    int32_t longest = 2;
    for (const auto& s : held_out) longest = std::max<int32_t>(longest, static_cast<int32_t>(s.size()));
    ASSIGN_OR_RETURN(std::unique_ptr<model::cpu::CpuModelRunner> quantised,
                     model::cpu::LoadCpuModel(out_dir, calib::SingleSequenceRunnerOptions(longest)));
    ASSIGN_OR_RETURN(quant::Checkpoint written, quant::Checkpoint::Open(out_dir));
    ASSIGN_OR_RETURN(std::unique_ptr<calib::QuantizedActivationSimulator> sim,
                     calib::QuantizedActivationSimulator::FromCheckpoint(written));
    const bool simulate = sim->num_quantised_inputs() > 0 || sim->num_kv() > 0;
    calib::LogitAgreement total, total_act;
    for (size_t i = 0; i < held_out.size(); ++i) {
      ASSIGN_OR_RETURN(core::Tensor lq, calib::SampleLogProbs(*quantised, held_out[i]));
      ASSIGN_OR_RETURN(calib::LogitAgreement a, calib::CompareLogProbs(reference[i], lq));
      total.Add(a);
      if (simulate) {
        quantised->set_activation_observer(sim.get());
        auto lqa = calib::SampleLogProbs(*quantised, held_out[i]);
        quantised->set_activation_observer(nullptr);
        if (!lqa.ok()) return lqa.status();
        ASSIGN_OR_RETURN(calib::LogitAgreement b, calib::CompareLogProbs(reference[i], *lqa));
        total_act.Add(b);
      }
      reference[i] = core::Tensor();
    }
    r.eval = total;
    if (simulate) {
      r.eval_activations = total_act;
      r.simulated_inputs = sim->num_quantised_inputs();
      r.simulated_kv = sim->num_kv();
      spdlog::info("quantize: with simulated NVFP4 activations ({} modules) and FP8 KV cache ({} layers): mean KL "
                   "{:.6f} nats, top-1 agreement {:.2f}%",
                   sim->num_quantised_inputs(), sim->num_kv(), total_act.mean_kl(), 100.0 * total_act.top1());
    }
    r.eval_samples = static_cast<int32_t>(held_out.size());
    r.eval_seconds = Since(t0);
    spdlog::info("quantize: held-out evaluation ({} samples, {} positions), weights only: mean KL(source || "
                 "quantised) {:.6f} nats, top-1 agreement {:.2f}%",
                 r.eval_samples, total.positions, total.mean_kl(), 100.0 * total.top1());
  }
  return r;
}

std::string FormatCalibrationSummary(const CalibratedQuantizeResult& r) {
  std::string s;
  if (r.calib_samples > 0) {
    s += fmt::format("calibration: {} samples, {} tokens{}, {:.1f} s; input_global_scale (W4A4) on {} NVFP4 modules, "
                     "FP8 KV-cache scales on {} attention layers\n",
                     r.calib_samples, r.calib_tokens, r.random_ids ? " (random ids: no tokenizer)" : "",
                     r.calib_seconds, r.w4a4_modules, r.kv_layers);
  } else {
    s += "calibration: not run (NVFP4 weight-only W4A16, no KV-cache scales)\n";
  }
  if (r.eval) {
    s += fmt::format("eval vs source (weights only): {} held-out samples, {} positions: mean KL {:.6f} nats, top-1 agreement "
                     "{:.2f}%, {:.1f} s\n",
                     r.eval_samples, r.eval->positions, r.eval->mean_kl(), 100.0 * r.eval->top1(), r.eval_seconds);
  }
  if (r.eval_activations) {
    s += fmt::format("eval vs source with quantised activations (simulated: NVFP4 inputs of {} modules, FP8 KV of {} "
                     "layers): mean KL {:.6f} nats, top-1 agreement {:.2f}%\n",
                     r.simulated_inputs, r.simulated_kv, r.eval_activations->mean_kl(),
                     100.0 * r.eval_activations->top1());
  }
  return s;
}

}  // namespace sparkserve::calib
