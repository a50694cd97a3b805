// `sparkserve bench engine`: decode speed of a ModelRunner in-process (no HTTP, no scheduler):
// for each context length and batch size, B sequences are prefilled to the context, then timed
// over decode steps that sample every row (greedy, the engine's sampler) end to end. On CUDA each
// figure comes with its floor: the bytes a step must read (weights once, each sequence's KV at
// its context, GDN state read and written) over the copy bandwidth measured in the same run.
// With --prompt-len, also the prefill rate and time to first token of fresh prompts.
#pragma once
#include <string>
#include <vector>

#include "head/cli/model_runner_factory.h"

namespace sparkserve::bench {

struct BenchEngineArgs {
  std::string model_dir;
  std::string backend = "cuda";
  std::vector<int> batches{1};
  std::vector<int> contexts{0};
  std::vector<int> prompt_lens;  // also time prefill of fresh prompts of these lengths (TTFT)
  int steps = 64;          // timed decode steps per point
  int warmup = 8;          // untimed decode steps first (graph capture happens here)
  int repeats = 3;         // timed windows per point; the median is reported
  int max_step_tokens = head::RunnerSizing{}.max_step_tokens;  // prefill tokens a step, as serve's default
  bool enforce_eager = false;
  std::string kv_dtype = "bf16";  // bf16 | fp8 (cuda)
  std::string state_dtype = "fp32";  // GDN state: fp32 | bf16 (cuda)
  bool profile = false;    // cuda: per-op GPU time of one more decode step per point
  std::string json_path;   // write results to this file ("-": stdout, and the table to stderr)
};

// Returns the process exit code (0 ok, 1 run failure, 2 bad arguments).
int RunBenchEngine(const BenchEngineArgs& args);

}  // namespace sparkserve::bench
