// --backend / --kv-dtype / --state-dtype (see runner_flags.h).
#include "head/cli/runner_flags.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {

namespace {

// A CLI transform from the names of an enum's values to the value: an unknown name is refused with
// the names that are accepted ("--backend: 'tpu': expected auto, cpu or cuda").
template <typename Enum>
CLI::Validator EnumNames(std::vector<std::pair<std::string, Enum>> names) {
  auto check = [names = std::move(names)](std::string& value) -> std::string {
    std::vector<std::string> accepted;
    for (const auto& [name, e] : names) {
      if (value == name) {
        value = std::to_string(static_cast<int>(e));
        return "";
      }
      accepted.push_back(name);
    }
    std::string list = accepted.back();
    if (accepted.size() > 1) {
      accepted.pop_back();
      list = absl::StrJoin(accepted, ", ") + " or " + list;
    }
    return "'" + value + "': expected " + list;
  };
  return CLI::Validator(check, "");
}

}  // namespace

void AddBackendOption(CLI::App* cmd, model::RunnerOptions* options, const std::string& default_name) {
  cmd->add_option("--backend", options->backend,
                  "auto|cpu|cuda (default " + default_name + "; auto: cuda when this build and machine have a GPU)")
      ->transform(EnumNames<model::Backend>(
          {{"auto", model::Backend::kAuto}, {"cpu", model::Backend::kCpu}, {"cuda", model::Backend::kCuda}}));
}

void AddCacheDtypeOptions(CLI::App* cmd, model::RunnerOptions* options) {
  cmd->add_option("--kv-dtype", options->kv_dtype,
                  "KV cache dtype: bf16 (default) or fp8 (CUDA only: e4m3 with the checkpoint's calibrated k/v "
                  "scales, half the memory a token; the CPU backend keeps fp32)")
      ->transform(
          EnumNames<model::KvCacheDtype>({{"bf16", model::KvCacheDtype::kBf16}, {"fp8", model::KvCacheDtype::kFp8}}));
  cmd->add_option("--state-dtype", options->state_dtype,
                  "GDN recurrent state dtype: fp32 (default, the model's mamba_ssm_dtype) or bf16 (CUDA only: half "
                  "the state memory and GDN decode traffic; the recurrence still runs in fp32 and the state rounds "
                  "to bf16 once a step)")
      ->transform(
          EnumNames<model::StateDtype>({{"fp32", model::StateDtype::kF32}, {"bf16", model::StateDtype::kBf16}}));
}

void AddSpecOptions(CLI::App* cmd, SpecFlags* flags) {
  cmd->add_option("--spec", flags->mode,
                  "speculative decoding: mtp (the checkpoint's MTP block drafts), ngram (prompt lookup: continues an "
                  "earlier occurrence of the last tokens) or off (default: mtp when the checkpoint has mtp.* weights "
                  "and the backend verifies drafts, else off)")
      ->check(CLI::IsMember({"mtp", "ngram", "off"}));
  cmd->add_option("--spec-tokens", flags->tokens, "most drafts per verify window, 1..8 (default 3)")
      ->check(CLI::Range(1, engine::kMaxSpecTokens));
  cmd->add_option("--spec-policy", flags->policy,
                  "auto (default: k per sequence from its acceptance and the measured step cost, 0 when drafting "
                  "does not pay) or fixed (always the most drafts the drafter offers)")
      ->check(CLI::IsMember({"auto", "fixed"}));
  cmd->add_option("--draft-vocab", flags->draft_vocab,
                  "MTP drafts choose among token ids [0, N) only: a draft step reads N rows of the lm_head "
                  "instead of all (byte-level BPE ids rise with merge rank, so the low ids are the frequent "
                  "tokens); output is unchanged, only which drafts are proposed. 0 (default): the whole "
                  "vocabulary. Single GPU for now (not with --nodes on CUDA)")
      ->check(CLI::NonNegativeNumber);
}

void ApplySpecToRunner(const SpecFlags& flags, model::RunnerOptions* options) {
  options->max_verify_tokens = flags.mode == "off" ? 1 : flags.tokens + 1;
  // The GPU MTP is opt-in for now: its KV fill and draft steps are not yet in the policy's cost, so
  // it is no default on CUDA (the CPU reference loads the block whenever the checkpoint has one).
  options->cuda_mtp = flags.mode == "mtp";
  options->draft_vocab = flags.draft_vocab;
}

engine::SpecConfig SpecConfigOf(const SpecFlags& flags) {
  engine::SpecConfig c;
  c.max_drafts = flags.tokens;
  c.policy = flags.policy == "fixed" ? engine::SpecPolicy::kFixed : engine::SpecPolicy::kAuto;
  c.mode = flags.mode == "mtp" ? engine::SpecMode::kMtp : flags.mode == "ngram" ? engine::SpecMode::kNgram
                                                                               : engine::SpecMode::kOff;
  return c;
}

absl::StatusOr<engine::SpecConfig> ResolveSpec(const SpecFlags& flags, const model::ModelRunner& runner) {
  engine::SpecConfig c = SpecConfigOf(flags);
  if (flags.mode.empty()) {
    const bool verifies = runner.capacity().max_verify_tokens >= flags.tokens + 1;
    c.mode = runner.has_mtp() && verifies ? engine::SpecMode::kMtp : engine::SpecMode::kOff;
    if (runner.has_mtp() && !verifies) {
      spdlog::info("speculation off: this backend cannot verify drafts yet (the checkpoint has an MTP block)");
    }
  }
  return c;
}

}  // namespace sparkserve::head
