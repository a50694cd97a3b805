// The sparkserve subcommands. Each lives in its own file (head/cli/<name>_command.cc or its
// layer's folder) and is registered in main.cc with one Add*Command line; it stores its exit code
// in `*exit_code` when it runs.
#pragma once
#include "CLI/CLI.hpp"

namespace sparkserve::head {

// Prints "sparkserve VERSION (commit C)\ncuda: sm_90a ..." to stdout.
void PrintVersion();
void AddTemplateCommand(CLI::App& app, int* exit_code);  // `sparkserve template` (template_command.cc)

// `sparkserve inspect MODEL_DIR [--json]` (head/cli/inspect_command.cc).
void AddInspectCommand(CLI::App& app, int* exit_code);
void AddScoreCommand(CLI::App& app, int* exit_code);  // score_command.cc
void AddRunCommand(CLI::App& app, int* exit_code);    // run_command.cc
void AddTokenizeCommand(CLI::App& app, int* exit_code);  // head/cli/tokenize_command.cc
void AddQuantizeCommand(CLI::App& app, int* exit_code);   // head/cli/quantize_command.cc
void AddDemoModelCommand(CLI::App& app, int* exit_code);  // head/cli/demo_model_command.cc
void AddServeCommand(CLI::App& app, int* exit_code);  // `sparkserve serve` (serve_command.cc)
void AddClusterCheckCommand(CLI::App& app, int* exit_code);  // cluster_check_command.cc
// `sparkserve pack MODEL_DIR OUT_FILE` and `sparkserve unpack FILE OUT_DIR` (model_path.cc).
void AddPackCommands(CLI::App& app, int* exit_code);
void AddBenchCommand(CLI::App& app, int* exit_code, int argc, char** argv);  // head/cli/bench_command.cc

}  // namespace sparkserve::head
