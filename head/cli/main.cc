// sparkserve: the head binary's entry point; one subcommand per job (DESIGN.md §8).
#include <cstdio>

#include "CLI/CLI.hpp"
#include "core/logging.h"
#include "head/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sparkserve: tensor-parallel Qwen3.5 inference server"};
  app.require_subcommand(0, 1);
  bool version = false;
  // Logs go to stderr from the start: subcommands run inside CLI11's parse.
  sparkserve::core::InitLogging();
  app.add_flag("--version", version, "print version, git commit and compiled CUDA architectures");
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& level) { sparkserve::core::InitLogging(level); },
         "trace|debug|info|warn|error|off (default info, or $SPARKSERVE_LOG_LEVEL); give it before the subcommand")
      ->trigger_on_parse();
  int exit_code = 0;
  // Subcommands register here.
  sparkserve::head::AddServeCommand(app, &exit_code);
  sparkserve::head::AddClusterCheckCommand(app, &exit_code);
  sparkserve::head::AddInspectCommand(app, &exit_code);
  sparkserve::head::AddTemplateCommand(app, &exit_code);
  sparkserve::head::AddScoreCommand(app, &exit_code);
  sparkserve::head::AddRunCommand(app, &exit_code);
  sparkserve::head::AddTokenizeCommand(app, &exit_code);
  sparkserve::head::AddQuantizeCommand(app, &exit_code);
  sparkserve::head::AddDemoModelCommand(app, &exit_code);
  sparkserve::head::AddPackCommands(app, &exit_code);
  sparkserve::head::AddBenchCommand(app, &exit_code, argc, argv);
  CLI11_PARSE(app, argc, argv);
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
