// `sparkserve demo-model OUT_DIR [--shape tiny|4b] [--recipe bf16|nvfp4-mixed|nvfp4|fp8] [--seed N]`:
// writes a random-weight Qwen3.5 checkpoint (model/demo_model.h) and prints its per-format table.
#include <chrono>
#include <cstdio>
#include <string>

#include "core/logging.h"
#include "fmt/format.h"
#include "head/cli/commands.h"
#include "head/demo/demo_model.h"

namespace sparkserve::head {

void AddDemoModelCommand(CLI::App& app, int* exit_code) {
  struct Args {
    std::string out_dir;
    head::DemoModelOptions options;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "demo-model", "write a random-weight Qwen3.5 checkpoint (qwen3_5_text layout, MTP block; tiny adds a tokenizer)");
  cmd->add_option("OUT_DIR", args->out_dir, "output directory (must not exist, or be empty)")->required();
  cmd->add_option("--shape", args->options.shape, "tiny (toy size, own tokenizer) or 4b (Qwen3.5-4B shapes)")
      ->check(CLI::IsMember({"tiny", "4b"}))
      ->capture_default_str();
  cmd->add_option("--recipe", args->options.recipe, "bf16, nvfp4-mixed, nvfp4 or fp8")
      ->check(CLI::IsMember({"bf16", "nvfp4-mixed", "nvfp4", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "random seed (same seed, same bytes)")->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "worker threads (default: all cores)");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->callback([args, exit_code]() {
    args->options.progress = !args->quiet;
    const auto start = std::chrono::steady_clock::now();
    auto report = head::WriteDemoModel(args->out_dir, args->options);
    if (!report.ok()) {
      std::fprintf(stderr, "demo-model: %s\n", std::string(report.status().message()).c_str());
      *exit_code = 1;
      return;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fputs(quant::FormatReportTable(*report).c_str(), stdout);
    std::printf("wrote %s (shape %s, recipe %s, seed %llu) in %.1f s\n", args->out_dir.c_str(),
                args->options.shape.c_str(), args->options.recipe.c_str(),
                static_cast<unsigned long long>(args->options.seed), secs);
    *exit_code = 0;
  });
}

}  // namespace sparkserve::head
