// LoadModelRunner: backend choice and sizing (see runner_factory.h).
#include "model/runner_factory.h"

#include <algorithm>

#include "core/device.h"
#include "core/status.h"
#include "fmt/format.h"
#include "model/cpu/cpu_model_loader.h"
#include "model/shard_cuts.h"
#ifdef SPARKSERVE_WITH_CUDA
#include "model/cuda/cuda_model_runner.h"
#endif

namespace sparkserve::model {

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}
std::string_view KvCacheDtypeName(KvCacheDtype d) { return d == KvCacheDtype::kFp8 ? "fp8" : "bf16"; }
std::string_view StateDtypeName(StateDtype d) { return d == StateDtype::kBf16 ? "bf16" : "fp32"; }

absl::StatusOr<LoadedRunner> LoadModelRunner(const std::string& dir, const RunnerOptions& options) {
  ASSIGN_OR_RETURN(Qwen35Config config, LoadQwen35Config(dir));
  ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Make(0, 1, config));
  ASSIGN_OR_RETURN(quant::Checkpoint full, quant::Checkpoint::Open(dir));
  ASSIGN_OR_RETURN(quant::Checkpoint shard, CutShard(full, config, plan));
  return LoadModelRunner(std::move(shard), config, plan, nullptr, options);
}

absl::StatusOr<LoadedRunner> LoadModelRunner(quant::Checkpoint shard, const Qwen35Config& config,
                                             const ShardPlan& plan, core::Collective* collective,
                                             const RunnerOptions& s) {
  if (s.max_batch < 1 || s.max_seq_len < 2 || s.kv_page_size < 1 || s.max_step_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format(
        "max_batch ({}), max_seq_len ({}), max_step_tokens ({}) and the KV page size ({}) must be positive",
        s.max_batch, s.max_seq_len, s.max_step_tokens, s.kv_page_size));
  }
  const int pages = s.max_batch * ((s.max_seq_len + s.kv_page_size - 1) / s.kv_page_size);
  LoadedRunner out;
  Backend backend = s.backend;
  if (backend == Backend::kAuto) {  // the GPU when this build and machine have one
#ifdef SPARKSERVE_WITH_CUDA
    auto devices = core::ListCudaDevices();
    backend = devices.ok() && !devices->empty() ? Backend::kCuda : Backend::kCpu;
#else
    backend = Backend::kCpu;
#endif
  }
  if (backend == Backend::kCpu) {
    if (s.w4a4_prefill) return absl::InvalidArgumentError("--w4a4-prefill needs the CUDA backend");
    if (s.kv_dtype == KvCacheDtype::kFp8) {
      return absl::InvalidArgumentError(
          "an fp8 KV cache needs the CUDA backend (--backend cuda); the CPU reference keeps K/V in fp32");
    }
    if (s.state_dtype == StateDtype::kBf16) {
      return absl::InvalidArgumentError(
          "a bf16 GDN state needs the CUDA backend (--backend cuda); the CPU reference keeps the state in fp32");
    }
    model::cpu::CpuRunnerOptions o;
    o.max_seq_len = s.max_seq_len;
    o.state.num_slots = s.max_batch + std::max(0, s.extra_slots);
    o.state.kv_page_size = s.kv_page_size;
    o.state.num_kv_pages = pages;
    o.state.max_verify_tokens = std::max(1, s.max_verify_tokens);
    o.draft_vocab = s.draft_vocab;
    ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuModelRunner> r,
                     cpu::LoadCpuModel(std::move(shard), config, plan, collective, o));
    out.config = r->config();
    out.runner = std::move(r);
    out.backend_description = "cpu";
    return out;
  }
  ASSIGN_OR_RETURN(std::vector<core::CudaDeviceInfo> devices, core::ListCudaDevices());
  if (s.device < 0 || s.device >= static_cast<int>(devices.size())) {
    return absl::InvalidArgumentError(fmt::format("CUDA device {} does not exist ({} found)", s.device, devices.size()));
  }
  const core::CudaDeviceInfo& dev = devices[static_cast<size_t>(s.device)];
#ifdef SPARKSERVE_WITH_CUDA
  cuda::CudaRunnerOptions o;
  o.device = s.device;
  o.num_slots = s.max_batch + std::max(0, s.extra_slots);
  o.num_kv_pages = 0;  // from the memory budget
  o.gpu_memory_utilization = s.gpu_memory_utilization;
  o.kv_page_size = s.kv_page_size;
  o.max_seq_len = s.max_seq_len;
  o.max_step_tokens = std::max(s.max_step_tokens, o.num_slots);
  o.cuda_graphs = s.cuda_graphs;
  o.max_verify_tokens = s.max_verify_tokens;
  o.mtp = s.cuda_mtp;
  o.draft_vocab = s.draft_vocab;
  o.kv_dtype = s.kv_dtype == KvCacheDtype::kFp8 ? kernels::cuda::KvDtype::kFp8E4M3 : kernels::cuda::KvDtype::kBf16;
  o.state_dtype = s.state_dtype == StateDtype::kBf16 ? kernels::cuda::GdnStateDtype::kBf16 : kernels::cuda::GdnStateDtype::kF32;
  o.w4a4_prefill = s.w4a4_prefill;
  if (s.w4a4_prefill && dev.major != 12) {
    return absl::InvalidArgumentError(fmt::format(
        "--w4a4-prefill needs a Blackwell sm_120/sm_121 GPU (DGX Spark, RTX 50); {} is sm_{}{}", dev.name, dev.major,
        dev.minor));
  }
  if (collective != nullptr && collective->world() != plan.world) {
    return absl::InvalidArgumentError(fmt::format("the collective has {} ranks, the shard plan {}",
                                                  collective->world(), plan.world));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaModelRunner> r,
                   cuda::CudaModelRunner::Load(shard, config, plan, collective, o));
  out.config = r->config();
  out.runner = std::move(r);
  out.backend_description = fmt::format("cuda: {} (sm_{}{})", dev.name, dev.major, dev.minor);
  return out;
#else
  return absl::FailedPreconditionError(
      fmt::format("found {} but this sparkserve was built without CUDA (rebuild with deploy/build.sh --cuda)", dev.name));
#endif
}

}  // namespace sparkserve::model
