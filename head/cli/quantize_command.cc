// `sparkserve quantize IN_DIR|FILE OUT_DIR|OUT_FILE [--pack] [--recipe nvfp4-mixed|nvfp4|fp8|FILE.json] [--calib FILE]
// [--calib-samples N] [--no-calib] [--no-eval] [--threads N]`: calibrates on the source model (CPU),
// streams a bf16/f16/f32 Qwen3.5 checkpoint into a compressed-tensors one (quant/quantizer/), and
// compares the output's logits with the source's (calib/); progress on stderr, tables on stdout.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fmt/format.h"
#include "calib/calibrated_quantize.h"
#include "head/cli/model_path.h"
#include "head/cli/commands.h"
#include "model/config.h"
#include "quant/model_pack.h"
#include "quant/quantizer/quantize_checkpoint.h"

namespace sparkserve::head {

void AddQuantizeCommand(CLI::App& app, int* exit_code) {
  struct Args {
    std::string in_dir, out_dir, recipe = "nvfp4-mixed", calib;
    int calib_samples = 8, eval_samples = 2, calib_max_tokens = 512;
    bool no_calib = false, no_eval = false;
    int threads = 0;
    uint64_t shard_mb = 4096;
    bool no_search = false, quiet = false, pack = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("quantize", "quantise a bf16/f16/f32 Qwen3.5 checkpoint to compressed-tensors "
                                                 "NVFP4/FP8 (streaming, tensor by tensor)");
  AcceptModelPath(cmd, cmd->add_option("IN_DIR", a->in_dir, "unquantised Hugging Face model directory, packed model file or qwen35 GGUF file (dequantised first)")->required(),
                  &a->in_dir);
  cmd->add_option("OUT_DIR", a->out_dir, "output directory (must not exist, or be empty); with --pack the packed file")
      ->required();
  cmd->add_flag("--pack", a->pack,
                "write one packed model file (as `sparkserve pack` makes) instead of a directory (the directory is "
                "built beside it first, then packed and removed)");
  cmd->add_option("--recipe", a->recipe, "nvfp4-mixed (default), nvfp4, fp8, bf16 or a JSON recipe file")
      ->capture_default_str();
  cmd->add_option("--calib", a->calib,
                  "calibration file: plain text (one sample per blank-line-separated paragraph) or JSONL chats "
                  "({\"messages\": [...]} per line, rendered with the chat template); default: a built-in mixed corpus");
  cmd->add_option("--calib-samples", a->calib_samples, "calibration samples")->capture_default_str();
  cmd->add_option("--calib-max-tokens", a->calib_max_tokens, "tokens per calibration sample (longer ones are cut)")
      ->capture_default_str();
  cmd->add_option("--eval-samples", a->eval_samples,
                  "held-out samples (after the calibration ones) for the KL / top-1 check against the source")
      ->capture_default_str();
  cmd->add_flag("--no-calib", a->no_calib,
                "skip calibration: NVFP4 weight-only (W4A16, no input_global_scale), no kv_cache_scheme");
  cmd->add_flag("--no-eval", a->no_eval, "skip the KL / top-1 comparison of the output with the source");
  cmd->add_option("--threads", a->threads, "worker threads (default: all cores)");
  cmd->add_option("--shard-size-mb", a->shard_mb, "maximum tensor data per safetensors shard, MiB")
      ->capture_default_str();
  cmd->add_flag("--no-scale-search", a->no_search, "NVFP4 group scales by plain round-to-nearest");
  cmd->add_flag("--quiet", a->quiet, "no progress bar");
  cmd->callback([a, exit_code]() {
    *exit_code = 1;
    auto fail = [](const absl::Status& s) {
      std::fprintf(stderr, "quantize: %s\n", std::string(s.message()).c_str());
    };
    auto config = model::LoadQwen35Config(a->in_dir);
    if (!config.ok()) {
      std::fprintf(stderr, "quantize: %s is not a readable Qwen3.5 checkpoint: %s\n", a->in_dir.c_str(),
                   std::string(config.status().message()).c_str());
      return;
    }
    if (!config->quantization_config_json.empty()) {
      std::fprintf(stderr,
                   "quantize: %s is already quantised (config.json has a quantization_config); give the bf16 "
                   "checkpoint\n",
                   a->in_dir.c_str());
      return;
    }
    auto recipe = quant::Recipe::Load(a->recipe);
    if (!recipe.ok()) return fail(recipe.status());
    if (a->shard_mb == 0) return fail(absl::InvalidArgumentError("--shard-size-mb must be positive"));
    if (a->no_calib) {
      std::fprintf(stderr,
                   "quantize: --no-calib: NVFP4 layers are written weight-only (W4A16, no input_global_scale) and "
                   "without kv_cache_scheme%s\n",
                   a->calib.empty() ? "" : fmt::format(" (--calib {} ignored)", a->calib).c_str());
    }
    quant::QuantizeOptions opts;
    opts.tie_word_embeddings = config->tie_word_embeddings;
    opts.text_prefix = std::string(config->weight_prefix());
    opts.search_scales = !a->no_search;
    opts.threads = a->threads;
    opts.progress = !a->quiet;
    opts.max_shard_bytes = a->shard_mb << 20;
    const auto start = std::chrono::steady_clock::now();
    calib::CalibrationOptions copt;
    copt.calibrate = !a->no_calib;
    copt.evaluate = !a->no_eval;
    copt.calib_file = a->calib;
    copt.samples = a->calib_samples;
    copt.eval_samples = a->eval_samples;
    copt.max_tokens = a->calib_max_tokens;
    const std::string out_dir = a->pack ? a->out_dir + ".quantize-partial" : a->out_dir;
    if (a->pack && std::filesystem::exists(a->out_dir)) {
      return fail(absl::AlreadyExistsError(fmt::format("{} exists (--pack writes a new file)", a->out_dir)));
    }
    auto result = calib::CalibrateAndQuantize(a->in_dir, out_dir, *recipe, opts, copt);
    if (!result.ok()) return fail(result.status());
    if (a->pack) {
      const absl::Status packed = quant::PackModelDirectory(out_dir, a->out_dir);
      std::error_code ec;
      std::filesystem::remove_all(out_dir, ec);
      if (!packed.ok()) return fail(packed);
    }
    const quant::QuantizeReport* report = &result->report;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& m : report->modules) {
      if (!m.fallback.empty()) std::fprintf(stderr, "quantize: fallback: %s: %s\n", m.name.c_str(), m.fallback.c_str());
    }
    std::fputs(quant::FormatReportTable(*report).c_str(), stdout);
    std::fputs(calib::FormatCalibrationSummary(*result).c_str(), stdout);
    std::printf("quantized %s -> %s (recipe %s) in %.1f s\n", a->in_dir.c_str(), a->out_dir.c_str(),
                recipe->name().c_str(), secs);
    *exit_code = 0;
  });
}

}  // namespace sparkserve::head
