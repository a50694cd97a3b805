// `sparkserve run MODEL_DIR (--prompt T | --ids 1,2,3) [--max-new N] [--temperature 0] [--seed S]
// [--ignore-eos] [--json] [--backend cpu|cuda]`: one-shot generation (default: the CPU reference
// backend). Greedy at temperature 0; stops on the eos ids of generation_config.json (then config.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "head/cli/model_runner_factory.h"
#include "head/engine/sampler.h"
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
  std::string backend = "cpu";
  std::string kv_dtype = "bf16";
  std::string state_dtype = "fp32";
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
  const int64_t max_len = static_cast<int64_t>(ids->size()) + std::max(a.max_new, 1);
  RunnerSizing sizing;
  sizing.backend = a.backend;
  sizing.kv_dtype = a.kv_dtype;
  sizing.state_dtype = a.state_dtype;
  sizing.max_batch = 1;
  sizing.max_seq_len = static_cast<int>(max_len);
  sizing.max_step_tokens = static_cast<int>(max_len);  // the prompt in one step
  auto loaded = LoadModelRunner(a.dir, sizing);
  if (!loaded.ok()) {
    spdlog::error("run: loading {} (--backend {}): {}", a.dir, a.backend, std::string(loaded.status().message()));
    return 1;
  }
  model::ModelRunner& runner = *loaded->runner;
  const std::vector<int32_t> eos = loaded->config.stop_token_ids();
  // The serving engine's sampler: the same seed gives the same tokens here and through `serve`.
  scheduler::SamplingParams params;
  params.temperature = static_cast<float>(a.temperature);
  const uint64_t seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  Sampler sampler(static_cast<int32_t>(loaded->config.vocab_size));
  model::SeqWork s;
  s.tokens = *ids;
  s.logits = model::LogitsWanted::kLast;
  for (int32_t p = 0; p < runner.capacity().num_kv_pages; ++p) s.kv_pages.push_back(p);
  std::vector<int32_t> generated;
  while (static_cast<int32_t>(generated.size()) < a.max_new) {
    model::StepPlan plan;
    plan.seqs.push_back(s);
    auto step = runner.Forward(plan);
    if (!step.ok()) {
      spdlog::error("run: {}", std::string(step.status().message()));
      return 1;
    }
    SamplingContext ctx;
    ctx.params = &params;
    ctx.prompt = *ids;
    ctx.output = generated;
    ctx.rng_seed = SequenceSeed(seed, 0);
    auto sampled = sampler.Sample({step->logits.data<float>(), static_cast<size_t>(step->logits.dim(1))}, ctx);
    if (!sampled.ok()) {
      spdlog::error("run: {}", std::string(sampled.status().message()));
      return 1;
    }
    const int32_t next = sampled->id;
    generated.push_back(next);
    if (!a.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    s.start_pos += static_cast<int32_t>(s.tokens.size());
    s.tokens = {next};
  }
  // Text of the generated ids without special tokens (eos included in `ids`, not in `text`).
  std::optional<std::string> text;
  if (*tok) text = (*tok)->Decode(generated, /*skip_special_tokens=*/true);
  if (a.json) {
    nlohmann::json j;
    j["ids"] = generated;
    j["text"] = text ? nlohmann::json(*text) : nlohmann::json(nullptr);  // null without a tokenizer
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
  cmd->add_option("MODEL_DIR", a->dir, "model directory (config.json + safetensors)")->required();
  auto* prompt = cmd->add_option("--prompt", a->prompt, "prompt text, encoded with MODEL_DIR/tokenizer.json");
  auto* ids = cmd->add_option("--ids", a->ids, "prompt token ids, e.g. 1,2,3");
  ids->excludes(prompt);
  cmd->add_option("--max-new", a->max_new, "tokens to generate at most (default 16)");
  cmd->add_option("--backend", a->backend, "cpu|cuda (default cpu)");
  AddCacheDtypeOptions(cmd, &a->kv_dtype, &a->state_dtype);
  cmd->add_option("--temperature", a->temperature, "0 = greedy (default 0)");
  cmd->add_option("--seed", a->seed, "sampling seed (default: random)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "do not stop on the model's eos ids");
  cmd->add_flag("--json", a->json, "print {\"ids\": [...], \"text\": ...}");
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
