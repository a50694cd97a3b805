// sparkserve: the head binary's entry point; one subcommand per job (DESIGN.md §8).
#include <cstdio>

#include "CLI/CLI.hpp"
#include "core/logging.h"
#include "head/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sparkserve: tensor-parallel Qwen3.5 inference server"};
  app.require_subcommand(0, 1);
  bool version = false;
  std::string log_level;
  app.add_flag("--version", version, "print version, git commit and compiled CUDA architectures");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (default info, or $SPARKSERVE_LOG_LEVEL)");
  int exit_code = 0;
  // Subcommands register here.
  sparkserve::head::AddTokenizeCommand(app, &exit_code);
  sparkserve::head::AddTemplateCommand(app, &exit_code);
  sparkserve::head::AddScoreCommand(app, &exit_code); sparkserve::head::AddRunCommand(app, &exit_code);
  sparkserve::head::AddServeCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  sparkserve::core::InitLogging(log_level);
  if (version) {
    sparkserve::head::PrintVersion();
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  return exit_code;
}
