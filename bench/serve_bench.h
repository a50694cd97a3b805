// `sparkserve bench serve`: ties the pieces together (server discovery, dataset, runs or a
// concurrency sweep, summary, saved JSON, /metrics snapshot, plots). The CLI is in
// head/cli/bench_command.cc; this is its body, callable from tests.
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace sparkserve::bench {

struct BenchServeArgs {
  std::string url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;      // empty: first id of GET /v1/models
  std::string tokenizer;  // local tokenizer.json or its directory
  std::string api_key;
  std::string dataset = "random";
  std::string dataset_path;
  int num_prompts = 1000;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0.0;
  int prefix_len = 0;
  int turns = 4;  // multiturn: turns per user (users: --num-prompts)
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int max_concurrency = 0;
  std::vector<int> sweep_concurrency;
  bool ignore_eos = false;
  std::string extra_body;  // JSON object merged into every request (e.g. a response_format)
  int warmup = 0;
  unsigned long seed = 0;
  double request_timeout_s = 600;
  std::vector<std::string> goodput;
  std::string save_result;
  std::string plot_dir;
  bool no_progress = false;
  std::string command_line;  // recorded in the JSON
};

// Runs the benchmark; prints the summary to stdout. Returns the process exit code (0 ok, 1 bad
// arguments or unreachable server, 3 plotting unavailable, 130 interrupted by SIGINT).
int RunBenchServe(const BenchServeArgs& args);

}  // namespace sparkserve::bench
