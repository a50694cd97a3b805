// The sparkserve subcommands. Each lives in its own file (head/cli/<name>_command.cc or its
// layer's folder) and is registered in main.cc with one Add*Command line; it stores its exit code
// in `*exit_code` when it runs.
#pragma once
#include "CLI/CLI.hpp"

namespace sparkserve::head {

// Prints "sparkserve VERSION (commit C)\ncuda: sm_90a ..." to stdout.
void PrintVersion();
void AddTokenizeCommand(CLI::App& app, int* exit_code);  // head/cli/tokenize_command.cc
void AddTemplateCommand(CLI::App& app, int* exit_code);  // `sparkserve template` (template_command.cc)
void AddScoreCommand(CLI::App& app, int* exit_code); void AddRunCommand(CLI::App& app, int* exit_code);  // score_command.cc, run_command.cc
void AddServeCommand(CLI::App& app, int* exit_code);  // `sparkserve serve` (serve_command.cc)

}  // namespace sparkserve::head
