// LoadModelRunner: the one place a ModelRunner is made from a model directory and typed options (the
// CPU reference, or the CUDA runner in CUDA builds), with the model's config. `serve`, `run`,
// `score`, `bench engine` and the node daemon all come here; the CLI spelling of the options lives
// in head/cli/runner_flags.h.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "core/collective.h"
#include "model/model_runner.h"
#include "model/shard_plan.h"
#include "quant/checkpoint.h"

namespace sparkserve::model {

enum class Backend { kAuto, kCpu, kCuda };  // kAuto: cuda when this build and machine have a GPU
enum class KvCacheDtype { kBf16, kFp8 };    // fp8: cuda only (e4m3 with the checkpoint's k/v scales)
enum class StateDtype { kF32, kBf16 };      // GDN recurrent state between steps; bf16: cuda only

std::string_view BackendName(Backend b);           // "auto" | "cpu" | "cuda"
std::string_view KvCacheDtypeName(KvCacheDtype d);  // "bf16" | "fp8"
std::string_view StateDtypeName(StateDtype d);      // "fp32" | "bf16"

struct RunnerOptions {
  Backend backend = Backend::kCpu;
  int32_t device = 0;             // cuda:N
  int32_t max_batch = 8;          // state slots: sequences in flight
  int32_t extra_slots = 0;        // more state slots, for prefix-cache checkpoints (never run a sequence)
  int32_t max_seq_len = 4096;     // prompt + output per sequence
  // Tokens of one step (the engine's token budget). 8192 as vLLM on a large GPU: a 4K prompt
  // prefills in one step, where the GEMMs run near their best rate.
  int32_t max_step_tokens = 8192;
  int32_t kv_page_size = 16;
  bool cuda_graphs = true;
  // cuda: the fraction of the GPU's memory this process may hold; the KV cache gets what weights,
  // state and activations leave (never more than max_batch full sequences).
  double gpu_memory_utilization = 0.9;
  KvCacheDtype kv_dtype = KvCacheDtype::kBf16;
  StateDtype state_dtype = StateDtype::kF32;
  // cuda on Blackwell (sm_120/121): NVFP4 prefill linears as W4A4 on block-scaled FP4 tensor cores
  // (activations quantised with the checkpoint's input_global_scale); untested on hardware, opt-in.
  bool w4a4_prefill = false;
  // Speculative decoding: the most columns of one verify window (1 + drafts); 1: no speculation.
  int32_t max_verify_tokens = 1;
  // cuda: load the checkpoint's MTP block and draft with it on the GPU (`--spec mtp`). The CPU
  // reference always loads it where the checkpoint has one.
  bool cuda_mtp = false;
  // MTP drafts are the greedy token among ids [0, draft_vocab) (0: the whole vocabulary): a draft
  // step reads that many lm_head rows. CUDA: one rank only.
  int32_t draft_vocab = 0;
};

struct LoadedRunner {
  std::unique_ptr<ModelRunner> runner;
  Qwen35Config config;
  std::string backend_description;  // "cpu", "cuda: NVIDIA H200 (sm_90)"
};

// CPU: KV pages cover every slot at max_seq_len. CUDA: sized from device memory. Errors: bad
// sizes, fp8 KV or a bf16 state on the CPU backend, CUDA unavailable (no driver, no GPU, or a
// CPU-only build, each said so), a KV cache that cannot hold one max_seq_len sequence (saying what
// to lower), and the loader's own errors.
absl::StatusOr<LoadedRunner> LoadModelRunner(const std::string& model_dir, const RunnerOptions& options);
// One tensor-parallel rank's runner from its shard (model/shard_cuts.h CutShard; a node rebuilds it
// from what its head shipped), exchanging partial sums through `collective` (null for one rank;
// its rank and world must be the plan's). The directory form is this with rank 0 of 1.
absl::StatusOr<LoadedRunner> LoadModelRunner(quant::Checkpoint shard, const Qwen35Config& config,
                                             const ShardPlan& plan, core::Collective* collective,
                                             const RunnerOptions& options);

}  // namespace sparkserve::model
