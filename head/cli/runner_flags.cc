// --backend / --kv-dtype / --state-dtype (see runner_flags.h).
#include "head/cli/runner_flags.h"

#include <map>

namespace sparkserve::head {

void AddBackendOption(CLI::App* cmd, model::RunnerOptions* options, const std::string& default_name) {
  const std::map<std::string, model::Backend> names{
      {"auto", model::Backend::kAuto}, {"cpu", model::Backend::kCpu}, {"cuda", model::Backend::kCuda}};
  cmd->add_option("--backend", options->backend,
                  "auto|cpu|cuda (default " + default_name + "; auto: cuda when this build and machine have a GPU)")
      ->transform(CLI::CheckedTransformer(names));
}

void AddCacheDtypeOptions(CLI::App* cmd, model::RunnerOptions* options) {
  const std::map<std::string, model::KvCacheDtype> kv{{"bf16", model::KvCacheDtype::kBf16},
                                                      {"fp8", model::KvCacheDtype::kFp8}};
  const std::map<std::string, model::StateDtype> state{{"fp32", model::StateDtype::kF32},
                                                       {"bf16", model::StateDtype::kBf16}};
  cmd->add_option("--kv-dtype", options->kv_dtype,
                  "KV cache dtype: bf16 (default) or fp8 (CUDA only: e4m3 with the checkpoint's calibrated k/v "
                  "scales, half the memory a token; the CPU backend keeps fp32)")
      ->transform(CLI::CheckedTransformer(kv));
  cmd->add_option("--state-dtype", options->state_dtype,
                  "GDN recurrent state dtype: fp32 (default, the model's mamba_ssm_dtype) or bf16 (CUDA only: half "
                  "the state memory and GDN decode traffic; the recurrence still runs in fp32 and the state rounds "
                  "to bf16 once a step)")
      ->transform(CLI::CheckedTransformer(state));
}

}  // namespace sparkserve::head
