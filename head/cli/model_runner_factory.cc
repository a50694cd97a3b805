// LoadModelRunner: backend choice and sizing for serve and bench engine.
#include "head/cli/model_runner_factory.h"

#include "core/device.h"
#include "core/status.h"
#include "fmt/format.h"
#include "model/cpu_model_loader.h"
#ifdef SPARKSERVE_WITH_CUDA
#include "model/cuda/cuda_model_runner.h"
#endif

namespace sparkserve::head {

absl::StatusOr<LoadedRunner> LoadModelRunner(const std::string& dir, const RunnerSizing& s) {
  if (s.max_batch < 1 || s.max_seq_len < 2 || s.kv_page_size < 1 || s.max_step_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format(
        "max_batch ({}), max_seq_len ({}), max_step_tokens ({}) and the KV page size ({}) must be positive",
        s.max_batch, s.max_seq_len, s.max_step_tokens, s.kv_page_size));
  }
  if (s.kv_dtype != "bf16" && s.kv_dtype != "fp8") {
    return absl::InvalidArgumentError(fmt::format("unknown KV cache dtype '{}' (expected bf16 or fp8)", s.kv_dtype));
  }
  if (s.state_dtype != "fp32" && s.state_dtype != "bf16") {
    return absl::InvalidArgumentError(
        fmt::format("unknown GDN state dtype '{}' (expected fp32 or bf16)", s.state_dtype));
  }
  const int pages = s.max_batch * ((s.max_seq_len + s.kv_page_size - 1) / s.kv_page_size);
  LoadedRunner out;
  std::string backend = s.backend;
  if (backend == "auto") {  // the GPU when this build and machine have one
#ifdef SPARKSERVE_WITH_CUDA
    auto devices = core::ListCudaDevices();
    backend = devices.ok() && !devices->empty() ? "cuda" : "cpu";
#else
    backend = "cpu";
#endif
  }
  if (backend == "cpu") {
    if (s.w4a4_prefill) return absl::InvalidArgumentError("--w4a4-prefill needs the CUDA backend");
    if (s.kv_dtype == "fp8") {
      return absl::InvalidArgumentError(
          "an fp8 KV cache needs the CUDA backend (--backend cuda); the CPU reference keeps K/V in fp32");
    }
    if (s.state_dtype == "bf16") {
      return absl::InvalidArgumentError(
          "a bf16 GDN state needs the CUDA backend (--backend cuda); the CPU reference keeps the state in fp32");
    }
    model::CpuRunnerOptions o;
    o.max_seq_len = s.max_seq_len;
    o.state.num_slots = s.max_batch;
    o.state.kv_page_size = s.kv_page_size;
    o.state.num_kv_pages = pages;
    o.state.max_verify_tokens = 1;
    ASSIGN_OR_RETURN(std::unique_ptr<model::CpuModelRunner> r, model::LoadCpuModel(dir, o));
    out.config = r->config();
    out.runner = std::move(r);
    out.backend_description = "cpu";
    return out;
  }
  if (backend != "cuda") {
    return absl::InvalidArgumentError(fmt::format("unknown backend '{}' (expected auto, cpu or cuda)", s.backend));
  }
  ASSIGN_OR_RETURN(std::vector<core::CudaDeviceInfo> devices, core::ListCudaDevices());
  if (s.device < 0 || s.device >= static_cast<int>(devices.size())) {
    return absl::InvalidArgumentError(fmt::format("CUDA device {} does not exist ({} found)", s.device, devices.size()));
  }
  const core::CudaDeviceInfo& dev = devices[static_cast<size_t>(s.device)];
#ifdef SPARKSERVE_WITH_CUDA
  model::cuda::CudaRunnerOptions o;
  o.device = s.device;
  o.num_slots = s.max_batch;
  o.num_kv_pages = 0;  // from the memory budget
  o.gpu_memory_utilization = s.gpu_memory_utilization;
  o.kv_page_size = s.kv_page_size;
  o.max_seq_len = s.max_seq_len;
  o.max_step_tokens = std::max(s.max_step_tokens, s.max_batch);
  o.cuda_graphs = s.cuda_graphs;
  o.kv_dtype = s.kv_dtype == "fp8" ? kernels::cuda::KvDtype::kFp8E4M3 : kernels::cuda::KvDtype::kBf16;
  o.state_dtype = s.state_dtype == "bf16" ? kernels::cuda::GdnStateDtype::kBf16 : kernels::cuda::GdnStateDtype::kF32;
  o.w4a4_prefill = s.w4a4_prefill;
  if (s.w4a4_prefill && dev.major != 12) {
    return absl::InvalidArgumentError(fmt::format(
        "--w4a4-prefill needs a Blackwell sm_120/sm_121 GPU (DGX Spark, RTX 50); {} is sm_{}{}", dev.name, dev.major,
        dev.minor));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<model::cuda::CudaModelRunner> r, model::cuda::CudaModelRunner::Load(dir, o));
  out.config = r->config();
  out.runner = std::move(r);
  out.backend_description = fmt::format("cuda: {} (sm_{}{})", dev.name, dev.major, dev.minor);
  return out;
#else
  return absl::FailedPreconditionError(
      fmt::format("found {} but this sparkserve was built without CUDA (rebuild with deploy/build.sh --cuda)", dev.name));
#endif
}

void AddCacheDtypeOptions(CLI::App* cmd, std::string* kv_dtype, std::string* state_dtype) {
  cmd->add_option("--kv-dtype", *kv_dtype,
                  "KV cache dtype: bf16 (default) or fp8 (CUDA only: e4m3 with the checkpoint's calibrated k/v "
                  "scales, half the memory a token; the CPU backend keeps fp32)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  cmd->add_option("--state-dtype", *state_dtype,
                  "GDN recurrent state dtype: fp32 (default, the model's mamba_ssm_dtype) or bf16 (CUDA only: half "
                  "the state memory and GDN decode traffic; the recurrence still runs in fp32 and the state rounds "
                  "to bf16 once a step)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

}  // namespace sparkserve::head
