// `sparkserve score MODEL_DIR (--ids 1,2,3 | --text T) [--out logits.npy]`: the logits of every
// position on the CPU reference backend, as a float32 [T, vocab] .npy file or JSON on stdout.
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/cluster/cluster_setup.h"
#include "head/cli/cluster_flags.h"
#include "head/cli/commands.h"
#include "head/cli/model_command_args.h"
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

int RunScore(const std::string& dir, const std::string& ids_text, const std::string& text, const std::string& out,
             const ClusterFlags& cluster_flags) {
  auto ids = InputIds(dir, ids_text, text);
  if (!ids.ok()) {
    spdlog::error("score: {}", std::string(ids.status().message()));
    return 2;
  }
  absl::StatusOr<ResolvedCluster> resolved = ResolveClusterFlags(cluster_flags, model::Backend::kCpu);
  if (!resolved.ok()) {
    spdlog::error("score: {}", std::string(resolved.status().message()));
    return 2;
  }
  const int64_t T = static_cast<int64_t>(ids->size());
  // One sequence of T positions on the CPU reference (with --nodes: split across them).
  model::RunnerOptions options;
  options.backend = model::Backend::kCpu;
  options.max_batch = 1;
  options.max_seq_len = static_cast<int32_t>(std::max<int64_t>(T, 2));
  options.max_step_tokens = static_cast<int32_t>(T);
  engine::cluster::ClusterRunner* cluster = nullptr;
  auto loaded = engine::cluster::LoadRunner(dir, options, resolved->options, resolved->collective, &cluster);
  if (!loaded.ok()) {
    spdlog::error("score: loading {}: {}", dir, std::string(loaded.status().message()));
    return 1;
  }
  if (cluster != nullptr) {
    if (absl::Status st = cluster->WaitUntilServing(std::chrono::minutes(10)); !st.ok()) {
      spdlog::error("score: {}", std::string(st.message()));
      return 1;
    }
  }
  model::ModelRunner* runner = loaded->runner.get();
  model::StepPlan plan;
  model::SeqWork s;
  s.tokens = *ids;
  s.logits = model::LogitsWanted::kAll;
  for (int32_t p = 0; p < runner->capacity().num_kv_pages; ++p) s.kv_pages.push_back(p);
  plan.seqs.push_back(std::move(s));
  auto step = runner->Run(plan);
  if (!step.ok()) {
    spdlog::error("score: {}", std::string(step.status().message()));
    return 1;
  }
  const int64_t V = step->logits.dim(1);
  const float* L = step->logits.data<float>();
  if (!out.empty()) {
    if (auto st = WriteNpyF32(out, L, T, V); !st.ok()) {
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
  auto* cmd = app.add_subcommand("score", "logits for every position of a token sequence (CPU reference backend)");
  auto dir = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("MODEL_DIR", *dir, "model directory (config.json + safetensors)")->required();
  auto* ids_opt = cmd->add_option("--ids", *ids, "comma-separated token ids, e.g. 1,2,3");
  auto* text_opt = cmd->add_option("--text", *text, "text, encoded with MODEL_DIR/tokenizer.json");
  ids_opt->excludes(text_opt);
  cmd->add_option("--out", *out, "write float32 [T, vocab] logits to this .npy file (default: JSON on stdout)");
  auto cluster = std::make_shared<ClusterFlags>();
  AddClusterOptions(cmd, cluster.get());
  cmd->callback([=] {
    UseStderrLogging(cmd);
    if (ids->empty() && text->empty()) {
      spdlog::error("score: give --ids or --text");
      *exit_code = 2;
      return;
    }
    *exit_code = RunScore(*dir, *ids, *text, *out, *cluster);
  });
}

}  // namespace sparkserve::head
