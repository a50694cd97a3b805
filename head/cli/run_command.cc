// `sparkserve run MODEL_DIR (--prompt T | --ids 1,2,3) [--max-new N] [--temperature 0] [--seed S]
// [--ignore-eos] [--json] [--backend cpu|cuda]`: one-shot generation (default: the CPU reference
// backend). Greedy at temperature 0; stops on the eos ids of generation_config.json (then config.json).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "engine/cluster/cluster_setup.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "head/cli/model_path.h"
#include "head/cli/cluster_flags.h"
#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "head/cli/runner_flags.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

struct RunArgs {
  std::string dir, prompt, ids;
  int32_t max_new = 16;
  double temperature = 0.0;
  int64_t seed = -1;
  bool ignore_eos = false;
  bool json = false;
  model::RunnerOptions runner;  // CPU by default
  SpecFlags spec;
  ClusterFlags cluster;
};

int RunGenerate(const RunArgs& a) {
  auto tok = LoadModelTokenizer(a.dir, /*required=*/!a.prompt.empty());
  if (!tok.ok()) {
    spdlog::error("run: {}", std::string(tok.status().message()));
    return 2;
  }
  auto ids = InputIds(a.dir, a.ids, a.prompt);
  if (!ids.ok()) {
    spdlog::error("run: {}", std::string(ids.status().message()));
    return 2;
  }
  if (a.max_new < 0 || a.temperature < 0) {
    spdlog::error("run: --max-new and --temperature must be >= 0");
    return 2;
  }
  absl::StatusOr<ResolvedCluster> cluster_flags = ResolveClusterFlags(a.cluster, a.runner.backend);
  if (!cluster_flags.ok()) {
    spdlog::error("run: {}", std::string(cluster_flags.status().message()));
    return 2;
  }
  const int64_t max_len = static_cast<int64_t>(ids->size()) + std::max(a.max_new, 1);
  model::RunnerOptions options = a.runner;
  options.max_batch = 1;
  options.max_seq_len = static_cast<int32_t>(max_len);
  options.max_step_tokens = static_cast<int32_t>(max_len);  // the prompt in one step
  ApplySpecToRunner(a.spec, &options);
  engine::cluster::ClusterRunner* cluster = nullptr;
  auto loaded = engine::cluster::LoadRunner(a.dir, options, cluster_flags->options, &cluster);
  if (!loaded.ok()) {
    spdlog::error("run: loading {} (--backend {}): {}", a.dir, model::BackendName(options.backend),
                  std::string(loaded.status().message()));
    return 1;
  }
  if (cluster != nullptr) {
    if (absl::Status st = cluster->WaitUntilServing(std::chrono::minutes(10)); !st.ok()) {
      spdlog::error("run: {}", std::string(st.message()));
      return 1;
    }
  }
  // The serving engine: the same seed gives the same tokens here and through `serve`.
  engine::EngineConfig ec;
  ec.scheduler.max_batch = 1;
  ec.scheduler.max_step_tokens = options.max_step_tokens;
  ec.eos_token_ids = loaded->config.stop_token_ids();
  auto spec = ResolveSpec(a.spec, *loaded->runner);
  if (!spec.ok()) {
    spdlog::error("run: {}", std::string(spec.status().message()));
    return 2;
  }
  ec.spec = *spec;
  auto created = engine::Engine::Create(std::move(loaded->runner), ec);
  if (!created.ok()) {
    spdlog::error("run: {}", std::string(created.status().message()));
    return 1;
  }
  std::vector<int32_t> generated;
  engine::EngineStats stats;
  if (a.max_new > 0) {
    (*created)->Start();
    scheduler::Request request;
    request.prompt_ids = *ids;
    request.max_tokens = a.max_new;
    request.sampling.temperature = static_cast<float>(a.temperature);
    if (a.seed >= 0) request.sampling.seed = static_cast<uint64_t>(a.seed);
    request.stop.ignore_eos = a.ignore_eos;
    auto samples = engine::Generate(**created, std::move(request));
    (*created)->Shutdown();
    stats = (*created)->Stats();
    if (!samples.ok()) {
      spdlog::error("run: {}", std::string(samples.status().message()));
      return 1;
    }
    generated = std::move(samples->front().ids);
  }
  // Text of the generated ids without special tokens (eos included in `ids`, not in `text`).
  std::optional<std::string> text;
  if (*tok) text = (*tok)->Decode(generated, /*skip_special_tokens=*/true);
  if (a.json) {
    nlohmann::json j;
    j["ids"] = generated;
    j["text"] = text ? nlohmann::json(*text) : nlohmann::json(nullptr);  // null without a tokenizer
    j["spec"] = {{"drafted", stats.spec_num_draft_tokens}, {"accepted", stats.spec_num_accepted_tokens}};
    std::printf("%s\n", j.dump().c_str());
  } else if (text) {
    std::printf("%s\n", text->c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i) line += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("run", "one-shot generation (CPU reference backend by default)");
  auto a = std::make_shared<RunArgs>();
  AcceptModelPath(cmd, cmd->add_option("MODEL_DIR", a->dir, "model directory (config.json + safetensors), packed model file or qwen35 GGUF file")->required(),
                  &a->dir, {.requantize = true});
  auto* prompt = cmd->add_option("--prompt", a->prompt, "prompt text, encoded with MODEL_DIR/tokenizer.json");
  auto* ids = cmd->add_option("--ids", a->ids, "prompt token ids, e.g. 1,2,3");
  ids->excludes(prompt);
  cmd->add_option("--max-new", a->max_new, "tokens to generate at most (default 16)");
  AddBackendOption(cmd, &a->runner, "cpu");
  AddCacheDtypeOptions(cmd, &a->runner);
  cmd->add_option("--temperature", a->temperature, "0 = greedy (default 0)");
  cmd->add_option("--seed", a->seed, "sampling seed (default: random)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop on the model's eos ids");
  cmd->add_flag("--json", a->json,
                "print {\"ids\": [...], \"text\": ..., \"spec\": {\"drafted\": N, \"accepted\": M}}");
  AddSpecOptions(cmd, &a->spec);
  AddClusterOptions(cmd, &a->cluster);
  cmd->callback([=] {
    UseStderrLogging(cmd);
    if (a->ids.empty() && a->prompt.empty()) {
      spdlog::error("run: give --prompt or --ids");
      *exit_code = 2;
      return;
    }
    *exit_code = RunGenerate(*a);
  });
}

}  // namespace sparkserve::head
