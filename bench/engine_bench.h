// `sparkserve bench engine`: decode speed of the engine in-process (no HTTP): for each context
// length and batch size, B greedy requests of `context` random ids run through the engine (the
// scheduler, the model runner, sampling, events), and the steps where all B decode one token
// each are timed end to end. On CUDA each
// figure comes with its floor: the bytes a step must read (weights once, each sequence's KV at
// its context, GDN state read and written) over the copy bandwidth measured in the same run.
// With --prompt-len, also the prefill rate and time to first token of fresh prompts. With --spec,
// the step cost curve the speculation policy weighs drafts against.
#pragma once
#include <string>
#include <vector>

#include "engine/spec_decode.h"
#include "engine/cluster/cluster_setup.h"
#include "model/runner_factory.h"

namespace sparkserve::bench {

inline model::RunnerOptions CudaDefault() {
  model::RunnerOptions o;
  o.backend = model::Backend::kCuda;
  return o;
}

struct BenchEngineArgs {
  std::string model_dir;
  model::RunnerOptions runner = CudaDefault();  // backend, dtypes, max_step_tokens (its flag's default)
  std::vector<int> batches{1};
  std::vector<int> contexts{0};
  std::vector<int> prompt_lens;  // also time prefill of fresh prompts of these lengths (TTFT)
  int steps = 64;          // timed decode steps per point
  int warmup = 8;          // untimed decode steps first (graph capture happens here)
  int repeats = 3;         // timed windows per point; the median is reported
  bool enforce_eager = false;
  bool profile = false;    // cuda: per-op GPU time of one more decode step per point
  std::string json_path;   // write results to this file ("-": stdout, and the table to stderr)
  // Speculation in the engine; when on, the step cost curve (1..256 tokens) and, for MTP, one
  // draft step are measured and printed first.
  engine::SpecConfig spec;
  // Tensor parallelism across machines (no nodes: one machine).
  engine::cluster::ClusterOptions cluster;
};

// Returns the process exit code (0 ok, 1 run failure, 2 bad arguments).
int RunBenchEngine(const BenchEngineArgs& args);

}  // namespace sparkserve::bench
