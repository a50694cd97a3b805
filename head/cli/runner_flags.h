// The command-line spelling of model::RunnerOptions (--backend, --kv-dtype, --state-dtype), shared
// by serve, run, score and bench engine so that every command takes the same names with one help text.
#pragma once
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "engine/spec_decode.h"
#include "model/model_runner.h"
#include "model/runner_factory.h"

namespace sparkserve::head {

// --backend auto|cpu|cuda into options->backend (`default_name` only words the help text).
void AddBackendOption(CLI::App* cmd, model::RunnerOptions* options, const std::string& default_name);
// --kv-dtype bf16|fp8 and --state-dtype fp32|bf16.
void AddCacheDtypeOptions(CLI::App* cmd, model::RunnerOptions* options);

// --spec mtp|ngram|off, --spec-tokens K, --spec-policy auto|fixed.
struct SpecFlags {
  std::string mode;  // empty: mtp when the checkpoint has mtp.* weights (and the runner verifies), else off
  int32_t tokens = 3;
  std::string policy = "auto";
  int32_t draft_vocab = 0;  // MTP drafts over token ids [0, N) only (0: the whole vocabulary)
};
void AddSpecOptions(CLI::App* cmd, SpecFlags* flags);
// Before loading: the verify window the runner must hold (1 when speculation is surely off).
void ApplySpecToRunner(const SpecFlags& flags, model::RunnerOptions* options);
// The engine's speculation settings for an explicit --spec (empty: off).
engine::SpecConfig SpecConfigOf(const SpecFlags& flags);
// After loading: the engine's speculation settings for `runner` (the default resolved).
absl::StatusOr<engine::SpecConfig> ResolveSpec(const SpecFlags& flags, const model::ModelRunner& runner);

}  // namespace sparkserve::head
