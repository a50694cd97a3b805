// LoadModelRunner: the one place a command turns --backend and sizing flags into a ModelRunner
// (the CPU reference, or the CUDA runner in CUDA builds), with the model's config.
#pragma once
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/model_runner.h"

namespace sparkserve::head {

struct RunnerSizing {
  std::string backend = "cpu";     // cpu | cuda | auto (cuda when this build and machine have a GPU)
  int max_batch = 8;               // state slots: sequences in flight
  int max_seq_len = 4096;          // prompt + output per sequence
  // Tokens of one step (the engine's token budget; serve's --max-num-batched-tokens). 8192 as vLLM on
  // a large GPU: a 4K prompt prefills in one step, where the GEMMs run near their best rate.
  int max_step_tokens = 8192;
  int kv_page_size = 16;
  bool cuda_graphs = true;
  // cuda: the fraction of the GPU's memory this process may hold; the KV cache gets what weights,
  // state and activations leave (never more than max_batch full sequences).
  double gpu_memory_utilization = 0.9;
  // KV cache element type: bf16 | fp8 (cuda only: float8_e4m3fn with the checkpoint's per-layer
  // k_scale / v_scale, half the bytes a token; the CPU reference keeps fp32 K/V).
  std::string kv_dtype = "bf16";
  // GDN recurrent state element type between steps: fp32 (the model's mamba_ssm_dtype) | bf16 (cuda
  // only: half the state memory and half the GDN decode traffic; the recurrence still runs in f32).
  std::string state_dtype = "fp32";
  // cuda on Blackwell (sm_120/121): NVFP4 prefill linears as W4A4 on block-scaled FP4 tensor cores
  // (activations quantised with the checkpoint's input_global_scale); untested on hardware, opt-in.
  bool w4a4_prefill = false;
  int device = 0;
};

struct LoadedRunner {
  std::unique_ptr<model::ModelRunner> runner;
  model::Qwen35Config config;
  std::string backend_description;  // "cpu", "cuda: NVIDIA H200 (sm_90)"
};

// CPU: KV pages cover every slot at max_seq_len. CUDA: sized from device memory. Errors: unknown
// backend, KV or state dtype (fp8 KV or a bf16 state on the CPU backend), CUDA unavailable (no driver, no GPU, or a CPU-only build, each said so), a KV cache that
// cannot hold one max_seq_len sequence (saying what to lower), and the loader's own errors.
absl::StatusOr<LoadedRunner> LoadModelRunner(const std::string& model_dir, const RunnerSizing& sizing);

// --kv-dtype bf16|fp8 and --state-dtype fp32|bf16, as serve, run and bench engine take them (into
// RunnerSizing's kv_dtype / state_dtype through the command's own fields).
void AddCacheDtypeOptions(CLI::App* cmd, std::string* kv_dtype, std::string* state_dtype);

}  // namespace sparkserve::head
