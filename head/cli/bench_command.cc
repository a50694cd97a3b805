// `sparkserve bench <subcommand>`: benchmarks. `bench serve` drives an OpenAI-compatible server
// the way `vllm bench serve` does (bench/serve_bench.h); `bench engine` times the model runner
// in-process (bench/engine_bench.h). Further benchmarks
// add one Add*Subcommand function below and one call in AddBenchCommand.
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "bench/engine_bench.h"
#include "bench/serve_bench.h"
#include "head/cli/model_path.h"
#include "head/cli/commands.h"
#include "head/cli/cluster_flags.h"
#include "spdlog/spdlog.h"
#include "head/cli/runner_flags.h"
#include "nlohmann/json.hpp"

namespace sparkserve::head {
namespace {

std::string JoinArgs(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

void AddBenchServeSubcommand(CLI::App& bench, int* exit_code, const std::string* command_line) {
  auto args = std::make_shared<bench::BenchServeArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "serve",
      "Benchmark an OpenAI-compatible streaming server (ours, vLLM, llama.cpp) as `vllm bench serve` does: "
      "TTFT, TPOT, ITL, E2EL, throughput, goodput. Plain http:// only (no TLS).");
  cmd->add_option("--url", args->url, "server base URL, http://HOST:PORT (plain http only)")->capture_default_str();
  cmd->add_option("--endpoint", args->endpoint, "/v1/completions or /v1/chat/completions")->capture_default_str();
  cmd->add_option("--model", args->model, "model name sent in requests (default: first id of GET /v1/models)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "local tokenizer.json or its directory: prompt lengths and output counts when the server has no "
                  "/tokenize or omits usage");
  cmd->add_option("--api-key", args->api_key, "sent as Authorization: Bearer KEY");
  cmd->add_option("--turns", args->turns, "multiturn: turns per user (users: --num-prompts; system prompt: "
                  "--prefix-len words, default 1000; user turns: --random-input-len words)")->capture_default_str();
  cmd->add_option("--dataset", args->dataset, "random | sharegpt | prefix | prompts | multiturn")
      ->check(CLI::IsMember({"random", "sharegpt", "prefix", "prompts", "multiturn"}))
      ->capture_default_str();
  cmd->add_option("--dataset-path", args->dataset_path, "ShareGPT JSON (sharegpt) or one prompt per line (prompts)");
  cmd->add_option("--num-prompts", args->num_prompts, "requests measured")->capture_default_str();
  cmd->add_option("--random-input-len", args->random_input_len, "prompt tokens (random, prefix suffix)")
      ->capture_default_str();
  cmd->add_option("--random-output-len", args->random_output_len, "max_tokens per request (random, prefix, prompts)")
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", args->random_range_ratio,
                  "lengths drawn uniformly from [len*(1-r), len*(1+r)]; 0 = exact")
      ->capture_default_str();
  cmd->add_option("--prefix-len", args->prefix_len, "shared prefix tokens (prefix dataset)");
  cmd->add_option("--request-rate", args->request_rate, "requests/s, Poisson/gamma arrivals (default inf: all at once)");
  cmd->add_option("--burstiness", args->burstiness, "gamma shape of arrivals (1 = Poisson)")->capture_default_str();
  cmd->add_option("--max-concurrency", args->max_concurrency, "cap on requests in flight (default unlimited)");
  cmd->add_option("--sweep-concurrency", args->sweep_concurrency, "run once per max concurrency: 1,2,4,...")
      ->delimiter(',');
  cmd->add_flag("--ignore-eos", args->ignore_eos, "send ignore_eos: true (vLLM extension) to get full lengths");
  cmd->add_option("--extra-body", args->extra_body,
                  "a JSON object merged into every request, e.g. '{\"response_format\": {\"type\": \"json_object\"}}'")
      ->check([](const std::string& v) {
        const auto j = nlohmann::json::parse(v, nullptr, false);
        return j.is_object() ? std::string() : std::string("--extra-body must be a JSON object");
      });
  cmd->add_option("--warmup", args->warmup, "warm-up requests before each run, excluded from results");
  cmd->add_option("--seed", args->seed, "seed for datasets and arrivals")->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout_s, "seconds per request before it counts as failed")
      ->capture_default_str();
  cmd->add_option("--goodput", args->goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--save-result", args->save_result, "write results (vLLM's key names) to FILE.json");
  cmd->add_option("--plot", args->plot_dir, "write PNG plots to DIR (bench/plot_bench.py, needs matplotlib)");
  cmd->add_flag("--no-progress", args->no_progress, "no progress bar on stderr");
  cmd->callback([args, exit_code, command_line] {
    args->command_line = *command_line;
    *exit_code = bench::RunBenchServe(*args);
  });
}

void AddBenchEngineSubcommand(CLI::App& bench, int* exit_code) {
  auto args = std::make_shared<bench::BenchEngineArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "engine",
      "Decode speed of the engine in-process (no HTTP): per batch size and context, tok/s of greedy requests "
      "(scheduling and sampling included), the bytes one step reads and, on CUDA, the floor (those bytes over the "
      "copy bandwidth measured in the same run) and the ratio floor / measured time.");
  AcceptModelPath(cmd, cmd->add_option("MODEL_DIR", args->model_dir, "model directory, packed model file or qwen35 GGUF file")->required(),
                  &args->model_dir, {.requantize = true});
  AddBackendOption(cmd, &args->runner, "cuda");
  cmd->add_option("--batch", args->batches, "batch sizes, comma-separated (default 1)")->delimiter(',');
  cmd->add_option("--context", args->contexts, "context lengths before the timed steps (default 0)")->delimiter(',');
  cmd->add_option("--prompt-len", args->prompt_lens,
                  "also time prefill: fresh prompts of these lengths per batch, to their first token (TTFT)")
      ->delimiter(',');
  cmd->add_option("--steps", args->steps, "timed decode steps per window (default 64)");
  cmd->add_option("--max-num-batched-tokens", args->runner.max_step_tokens,
                  "tokens of one prefill step, as serve's flag (default 8192)");
  cmd->add_option("--warmup", args->warmup, "untimed decode steps first (default 8)");
  cmd->add_option("--repeats", args->repeats, "timed windows; the median is reported (default 3)");
  cmd->add_flag("--enforce-eager", args->enforce_eager, "cuda: no CUDA graphs");
  AddCacheDtypeOptions(cmd, &args->runner);
  cmd->add_flag("--profile", args->profile,
                "cuda: print each op's GPU time in one more decode step per point and in the first step of one "
                "more prefill per prompt length");
  cmd->add_option("--json", args->json_path, "write the results as JSON to FILE ('-': stdout)");
  auto spec = std::make_shared<SpecFlags>();
  AddSpecOptions(cmd, spec.get());  // default off here: the decode figures are plain decoding's
  auto cluster = std::make_shared<ClusterFlags>();
  AddClusterOptions(cmd, cluster.get());
  cmd->callback([args, spec, cluster, exit_code] {
    if (spec->mode.empty()) spec->mode = "off";
    args->spec = SpecConfigOf(*spec);
    ApplySpecToRunner(*spec, &args->runner);
    absl::StatusOr<ResolvedCluster> resolved = ResolveClusterFlags(*cluster, args->runner.backend);
    if (!resolved.ok()) {
      spdlog::error("bench engine: {}", std::string(resolved.status().message()));
      *exit_code = 2;
      return;
    }
    args->cluster = resolved->options;
    *exit_code = bench::RunBenchEngine(*args);
  });
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code, int argc, char** argv) {
  static const std::string command_line = JoinArgs(argc, argv);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks: `bench serve` (an OpenAI-compatible server), `bench engine` (the model runner in-process)");
  bench->require_subcommand(1);
  AddBenchServeSubcommand(*bench, exit_code, &command_line);
  AddBenchEngineSubcommand(*bench, exit_code);
}

}  // namespace sparkserve::head
