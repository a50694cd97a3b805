// `sparkserve quantize` end to end with calibration: runs the SOURCE model (CPU reference, f32) over
// calibration samples with an AbsMaxObserver to set every NVFP4 module's input_global_scale (W4A4)
// and the FP8 KV-cache scales, keeps the source's log-probabilities of held-out samples, frees the
// source, quantises (streaming), then loads the quantised output with the CPU loader and reports the
// KL divergence and top-1 agreement of its final logits against the source's: with the weights alone
// (W4A16, what sm_90 runs) and with simulated NVFP4 activations and FP8 KV cache (W4A4, Blackwell).
// Peak memory: the source model in f32 (4 bytes per parameter) plus the held-out log-probabilities
// (eval tokens x vocab x 4 bytes); the quantised model is loaded only after the source is freed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calib/calibration.h"
#include "quant/quantizer/quantize_pipeline.h"
#include "quant/quantizer/recipe.h"

namespace sparkserve::calib {

struct CalibrationOptions {
  bool calibrate = true;        // false: NVFP4 weight-only (W4A16), no KV-cache scales
  bool evaluate = true;         // KL / top-1 of the output against the source on held-out samples
  std::string calib_file;       // "" = the built-in corpus (calibration_corpus.h)
  int32_t samples = 8;          // calibration samples
  int32_t eval_samples = 2;     // held-out samples (after the calibration ones), not used for scales
  int32_t max_tokens = 512;     // per calibration sample
  int32_t eval_max_tokens = 256;  // per held-out sample (bounds the kept log-probabilities)
  uint64_t seed = 0;            // random ids when the model has no tokenizer
};

struct CalibratedQuantizeResult {
  quant::QuantizeReport report;
  std::vector<std::string> warnings;  // also logged to stderr as they happen
  bool random_ids = false;            // calibrated on random ids (no tokenizer)
  int32_t calib_samples = 0;
  int64_t calib_tokens = 0;
  size_t w4a4_modules = 0;            // NVFP4 modules given input_global_scale
  size_t kv_layers = 0;               // attention modules given k_scale / v_scale
  double calib_seconds = 0;
  std::optional<calib::LogitAgreement> eval;  // absent with evaluate = false or no held-out sample
  // The same with the output's activation scales applied as a W4A4 engine does (NVFP4 inputs
  // QDQ'd with input_global_scale, K/V through FP8 with k/v_scale); absent when it has none.
  std::optional<calib::LogitAgreement> eval_activations;
  size_t simulated_inputs = 0, simulated_kv = 0;  // modules / attention layers the simulation covered
  int32_t eval_samples = 0;
  double eval_seconds = 0;
  quant::CalibrationScales scales;    // what calibration handed the quantizer
};

// Quantises `in_dir` into `out_dir` (as quant::QuantizeCheckpoint) with `calib` applied.
// `options.calibration` is replaced by the calibration's result. Errors: as QuantizeCheckpoint, plus
// an unreadable --calib file, a source the CPU model cannot load, a failed forward.
absl::StatusOr<CalibratedQuantizeResult> CalibrateAndQuantize(const std::string& in_dir, const std::string& out_dir,
                                                              const quant::Recipe& recipe,
                                                              quant::QuantizeOptions options,
                                                              const CalibrationOptions& calib);

// Lines for the end of the report table (calibration and evaluation figures).
std::string FormatCalibrationSummary(const CalibratedQuantizeResult& r);

}  // namespace sparkserve::calib
