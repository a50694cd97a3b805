// `sparkserve run MODEL_DIR (--prompt T | --ids 1,2,3) [--max-new N] [--temperature 0] [--seed S]
// [--ignore-eos] [--json]`: one-shot generation on the CPU reference backend. Greedy at
// temperature 0; stops on the eos ids of generation_config.json (then config.json).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "kernels/cpu/ops.h"
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
};

int32_t Sample(const float* logits, int64_t V, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0.0) return kernels::cpu::Argmax(logits, V);
  const float m = *std::max_element(logits, logits + V);
  std::vector<double> p(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) p[static_cast<size_t>(i)] = std::exp((logits[i] - m) / temperature);
  std::discrete_distribution<int32_t> dist(p.begin(), p.end());
  return dist(rng);
}

int RunGenerate(const RunArgs& a) {
  if (!a.prompt.empty()) {
    spdlog::error("run: {}", kNoTokenizerMessage);
    return 2;
  }
  auto ids = ParseIdList(a.ids);
  if (!ids.ok()) {
    spdlog::error("run: {}", std::string(ids.status().message()));
    return 2;
  }
  if (a.max_new < 0 || a.temperature < 0) {
    spdlog::error("run: --max-new and --temperature must be >= 0");
    return 2;
  }
  const int64_t max_len = static_cast<int64_t>(ids->size()) + std::max(a.max_new, 1);
  auto loaded = LoadSingleSequenceModel(a.dir, max_len);
  if (!loaded.ok()) {
    spdlog::error("run: loading {}: {}", a.dir, std::string(loaded.status().message()));
    return 1;
  }
  auto& runner = **loaded;
  const std::vector<int32_t> eos = runner.config().stop_token_ids();
  std::mt19937_64 rng(a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}());
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
    const int32_t next = Sample(step->logits.data<float>(), step->logits.dim(1), a.temperature, rng);
    generated.push_back(next);
    if (!a.ignore_eos && std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    s.start_pos += static_cast<int32_t>(s.tokens.size());
    s.tokens = {next};
  }
  if (a.json) {
    nlohmann::json j;
    j["ids"] = generated;
    j["text"] = nullptr;  // no tokenizer in this build
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i) line += (i ? "," : "") + std::to_string(generated[i]);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("run", "one-shot generation (CPU reference backend)");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("MODEL_DIR", a->dir, "model directory (config.json + safetensors)")->required();
  auto* prompt = cmd->add_option("--prompt", a->prompt, "prompt text (needs the tokenizer)");
  auto* ids = cmd->add_option("--ids", a->ids, "prompt token ids, e.g. 1,2,3");
  ids->excludes(prompt);
  cmd->add_option("--max-new", a->max_new, "tokens to generate at most (default 16)");
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
