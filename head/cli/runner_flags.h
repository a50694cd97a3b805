// The command-line spelling of model::RunnerOptions (--backend, --kv-dtype, --state-dtype), shared
// by serve, run, score and bench engine so that every command takes the same names with one help text.
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "model/runner_factory.h"

namespace sparkserve::head {

// --backend auto|cpu|cuda into options->backend (`default_name` only words the help text).
void AddBackendOption(CLI::App* cmd, model::RunnerOptions* options, const std::string& default_name);
// --kv-dtype bf16|fp8 and --state-dtype fp32|bf16.
void AddCacheDtypeOptions(CLI::App* cmd, model::RunnerOptions* options);

}  // namespace sparkserve::head
