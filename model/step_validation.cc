// ValidateStepPlan: the checks every backend runs before a step mutates state.
#include "model/step_validation.h"

#include <set>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::model {

absl::Status ValidateSeq(const StepLimits& limits, SlotId slot, int64_t start_pos, size_t n, size_t pages) {
  if (slot < 0 || slot >= limits.num_slots) {
    return absl::InvalidArgumentError(fmt::format("slot {} outside [0, {})", slot, limits.num_slots));
  }
  if (n == 0) return absl::InvalidArgumentError(fmt::format("slot {}: no tokens", slot));
  const int64_t end = start_pos + static_cast<int64_t>(n);
  if (start_pos < 0 || end > limits.max_seq_len) {
    return absl::InvalidArgumentError(fmt::format("slot {}: positions [{}, {}) outside the context of {}", slot,
                                                  start_pos, end, limits.max_seq_len));
  }
  const int64_t P = limits.kv_page_size;
  if (limits.needs_kv && static_cast<int64_t>(pages) * P < end) {
    return absl::InvalidArgumentError(
        fmt::format("slot {}: {} KV pages of {} tokens do not cover {} positions", slot, pages, P, end));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepPlan(const StepLimits& limits, const StepPlan& plan) {
  std::set<SlotId> seen;
  for (const SeqWork& s : plan.seqs) {
    RETURN_IF_ERROR(ValidateSeq(limits, s.slot, s.start_pos, s.tokens.size(), s.kv_pages.size()));
    if (!seen.insert(s.slot).second) {
      return absl::InvalidArgumentError(fmt::format("slot {} appears twice in one step", s.slot));
    }
    if (s.keep_column_states && static_cast<int32_t>(s.tokens.size()) > limits.max_verify_tokens) {
      return absl::InvalidArgumentError(fmt::format("slot {}: verify of {} tokens exceeds max_verify_tokens {}", s.slot,
                                                    s.tokens.size(), limits.max_verify_tokens));
    }
    for (const int32_t id : s.tokens) {
      if (id < 0 || id >= limits.vocab_size) {
        return absl::InvalidArgumentError(
            fmt::format("slot {}: token id {} outside the vocabulary [0, {})", s.slot, id, limits.vocab_size));
      }
    }
    if (limits.needs_kv) {
      for (const int32_t page : s.kv_pages) {
        if (page < 0 || page >= limits.num_kv_pages) {
          return absl::InvalidArgumentError(
              fmt::format("slot {}: KV page {} outside the pool [0, {})", s.slot, page, limits.num_kv_pages));
        }
      }
    }
  }
  if (limits.max_step_tokens > 0 && plan.num_tokens() > limits.max_step_tokens) {
    return absl::InvalidArgumentError(fmt::format("a step of {} tokens exceeds the runner's limit of {} per step",
                                                  plan.num_tokens(), limits.max_step_tokens));
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model
