// `sparkserve score MODEL_DIR (--ids 1,2,3 | --text T) [--out logits.npy] [--backend cpu|cuda|auto]
// [--kv-dtype --state-dtype] [--nodes ...]`: the logits of every position (default: the CPU reference backend), as
// a float32 [T, vocab] .npy file or JSON on stdout; with --backend cuda, the GPU's logits to check
// against the reference.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/cluster/cluster_setup.h"
#include "head/cli/model_path.h"
#include "head/cli/cluster_flags.h"
#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
#include "head/cli/runner_flags.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::head {
namespace {

absl::Status WriteNpyF32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  const size_t unpadded = 10 + header.size() + 1;  // magic(6) + version(2) + len(2) + header + '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(fmt::format("cannot write {}", path));
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(static_cast<char>(len & 0xff));
  f.put(static_cast<char>(len >> 8));
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(sizeof(float) * rows * cols));
  if (!f) return absl::InternalError(fmt::format("writing {} failed", path));
  return absl::OkStatus();
}

struct ScoreArgs {
  std::string dir, ids, text, out;
  model::RunnerOptions runner;  // CPU by default
  ClusterFlags cluster;         // --nodes: split across them
};

int RunScore(const ScoreArgs& a) {
  auto ids = InputIds(a.dir, a.ids, a.text);
  if (!ids.ok()) {
    spdlog::error("score: {}", std::string(ids.status().message()));
    return 2;
  }
  absl::StatusOr<ResolvedCluster> resolved = ResolveClusterFlags(a.cluster, a.runner.backend);
  if (!resolved.ok()) {
    spdlog::error("score: {}", std::string(resolved.status().message()));
    return 2;
  }
  const int64_t T = static_cast<int64_t>(ids->size());
  model::RunnerOptions options = a.runner;  // one sequence, the whole of it in one step
  options.max_batch = 1;
  options.max_seq_len = static_cast<int32_t>(std::max<int64_t>(T, 2));
  options.max_step_tokens = options.max_seq_len;
  engine::cluster::ClusterRunner* cluster = nullptr;
  auto loaded = engine::cluster::LoadRunner(a.dir, options, resolved->options, &cluster);
  if (!loaded.ok()) {
    spdlog::error("score: loading {} (--backend {}): {}", a.dir, model::BackendName(options.backend),
                  std::string(loaded.status().message()));
    return 1;
  }
  if (cluster != nullptr) {
    if (absl::Status st = cluster->WaitUntilServing(std::chrono::minutes(10)); !st.ok()) {
      spdlog::error("score: {}", std::string(st.message()));
      return 1;
    }
  }
  model::ModelRunner& runner = *loaded->runner;
  model::StepPlan plan;
  model::SeqWork s;
  s.tokens = *ids;
  s.logits = model::LogitsWanted::kAll;
  for (int32_t p = 0; p < runner.capacity().num_kv_pages; ++p) s.kv_pages.push_back(p);
  plan.seqs.push_back(std::move(s));
  auto step = runner.Run(plan);
  if (!step.ok()) {
    spdlog::error("score: {}", std::string(step.status().message()));
    return 1;
  }
  const int64_t V = step->logits.dim(1);
  const float* L = step->logits.data<float>();
  if (!a.out.empty()) {
    if (auto st = WriteNpyF32(a.out, L, T, V); !st.ok()) {
      spdlog::error("score: {}", std::string(st.message()));
      return 1;
    }
    return 0;
  }
  nlohmann::json j;
  j["ids"] = *ids;
  j["vocab_size"] = V;
  auto& rows = j["logits"] = nlohmann::json::array();
  for (int64_t t = 0; t < T; ++t) rows.push_back(std::vector<float>(L + t * V, L + (t + 1) * V));
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

void AddScoreCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("score", "logits for every position of a token sequence (CPU reference backend "
                                          "by default)");
  auto a = std::make_shared<ScoreArgs>();
  AcceptModelPath(cmd, cmd->add_option("MODEL_DIR", a->dir, "model directory (config.json + safetensors), packed model file or qwen35 GGUF file")->required(),
                  &a->dir, {.requantize = true});
  auto* ids_opt = cmd->add_option("--ids", a->ids, "comma-separated token ids, e.g. 1,2,3");
  auto* text_opt = cmd->add_option("--text", a->text, "text, encoded with MODEL_DIR/tokenizer.json");
  ids_opt->excludes(text_opt);
  cmd->add_option("--out", a->out, "write float32 [T, vocab] logits to this .npy file (default: JSON on stdout)");
  AddBackendOption(cmd, &a->runner, "cpu: the fp32 reference");
  AddCacheDtypeOptions(cmd, &a->runner);
  AddClusterOptions(cmd, &a->cluster);
  cmd->callback([=] {
    UseStderrLogging(cmd);
    if (a->ids.empty() && a->text.empty()) {
      spdlog::error("score: give --ids or --text");
      *exit_code = 2;
      return;
    }
    *exit_code = RunScore(*a);
  });
}

}  // namespace sparkserve::head
