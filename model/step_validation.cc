// ValidateStepPlan: the checks every backend runs before a step mutates state.
#include "model/step_validation.h"

#include <algorithm>
#include <set>
#include <vector>

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

namespace {

absl::Status CheckSlot(const StepLimits& limits, SlotId slot, const char* what) {
  if (slot < 0 || slot >= limits.num_slots) {
    return absl::InvalidArgumentError(fmt::format("{}: slot {} outside [0, {})", what, slot, limits.num_slots));
  }
  return absl::OkStatus();
}

absl::Status CheckIds(const StepLimits& limits, SlotId slot, const std::vector<int32_t>& ids) {
  for (const int32_t id : ids) {
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(
          fmt::format("slot {}: token id {} outside the vocabulary [0, {})", slot, id, limits.vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPages(const StepLimits& limits, SlotId slot, const std::vector<int32_t>& pages) {
  if (!limits.needs_kv) return absl::OkStatus();
  for (const int32_t page : pages) {
    if (page < 0 || page >= limits.num_kv_pages) {
      return absl::InvalidArgumentError(
          fmt::format("slot {}: KV page {} outside the pool [0, {})", slot, page, limits.num_kv_pages));
    }
  }
  return absl::OkStatus();
}

int64_t LogitRows(const StepPlan& plan) {
  int64_t rows = 0;
  for (const SeqWork& s : plan.seqs) {
    rows += s.logits == LogitsWanted::kAll ? s.num_tokens() : s.logits == LogitsWanted::kLast ? 1 : 0;
  }
  return rows;
}

}  // namespace

absl::Status ValidateStepPlan(const StepLimits& limits, const StepPlan& plan) {
  for (const SlotCopy& c : plan.copies) {
    RETURN_IF_ERROR(CheckSlot(limits, c.src, "slot copy source"));
    RETURN_IF_ERROR(CheckSlot(limits, c.dst, "slot copy destination"));
    if (c.src == c.dst) return absl::InvalidArgumentError(fmt::format("slot copy from slot {} onto itself", c.src));
  }
  for (const PageCopy& c : plan.page_copies) {
    if (c.src < 0 || c.src >= limits.num_kv_pages || c.dst < 0 || c.dst >= limits.num_kv_pages || c.src == c.dst) {
      return absl::InvalidArgumentError(fmt::format("KV page copy {} -> {}: pages outside [0, {}) or the same page",
                                                    c.src, c.dst, limits.num_kv_pages));
    }
  }
  std::set<SlotId> committed;
  for (const ColumnCommit& c : plan.commits) {
    RETURN_IF_ERROR(CheckSlot(limits, c.slot, "column commit"));
    if (c.accepted < 1 || c.accepted > limits.max_verify_tokens) {
      return absl::InvalidArgumentError(fmt::format("column commit of slot {}: accepted {} outside [1, {}]", c.slot,
                                                    c.accepted, limits.max_verify_tokens));
    }
    if (!committed.insert(c.slot).second) {
      return absl::InvalidArgumentError(fmt::format("slot {} is committed twice in one step", c.slot));
    }
  }
  std::set<SlotId> drafted;
  for (const DraftWork& d : plan.drafts) {
    if (!limits.has_mtp) {
      return absl::FailedPreconditionError("draft work needs the checkpoint's MTP block (mtp.*), which is not loaded");
    }
    const size_t n = d.tokens.size();
    if (d.num_drafts < 0) {
      return absl::InvalidArgumentError(fmt::format("draft work of slot {}: {} drafts", d.slot, d.num_drafts));
    }
    // The positions it writes: its n teacher-forced ones, then one per draft after the first.
    RETURN_IF_ERROR(ValidateSeq(limits, d.slot, d.start_pos, n + static_cast<size_t>(std::max(d.num_drafts - 1, 0)),
                                d.kv_pages.size()));
    if (d.hidden_row < 0 || d.hidden_row + static_cast<int64_t>(n) > limits.prev_step_rows) {
      return absl::InvalidArgumentError(fmt::format(
          "draft work of slot {}: hidden rows [{}, {}) are not among the {} rows the previous step left", d.slot,
          d.hidden_row, d.hidden_row + static_cast<int64_t>(n), limits.prev_step_rows));
    }
    RETURN_IF_ERROR(CheckIds(limits, d.slot, d.tokens));
    RETURN_IF_ERROR(CheckPages(limits, d.slot, d.kv_pages));
    if (!drafted.insert(d.slot).second) {
      return absl::InvalidArgumentError(fmt::format("slot {} has two draft works in one step", d.slot));
    }
  }
  std::set<SlotId> seen;
  for (const SeqWork& s : plan.seqs) {
    RETURN_IF_ERROR(ValidateSeq(limits, s.slot, s.start_pos, static_cast<size_t>(s.num_tokens()), s.kv_pages.size()));
    if (!seen.insert(s.slot).second) {
      return absl::InvalidArgumentError(fmt::format("slot {} appears twice in one step", s.slot));
    }
    if (s.keep_column_states && s.num_tokens() > limits.max_verify_tokens) {
      return absl::InvalidArgumentError(fmt::format("slot {}: verify of {} tokens exceeds max_verify_tokens {}", s.slot,
                                                    s.num_tokens(), limits.max_verify_tokens));
    }
    if (s.num_drafts != 0) {
      const auto d = std::find_if(plan.drafts.begin(), plan.drafts.end(),
                                  [&](const DraftWork& w) { return w.slot == s.slot; });
      if (s.num_drafts < 0 || d == plan.drafts.end() || d->num_drafts != s.num_drafts) {
        return absl::InvalidArgumentError(fmt::format(
            "slot {}: the forward takes {} drafts but this step drafts {} for the slot", s.slot, s.num_drafts,
            d == plan.drafts.end() ? 0 : d->num_drafts));
      }
      // Draft 0 is the token at position d.start_pos + n + 1 (tokens[i] sits at start_pos + i + 1).
      const int64_t first_draft = d->start_pos + static_cast<int64_t>(d->tokens.size()) + 1;
      const int64_t verify_draft = s.start_pos + static_cast<int64_t>(s.tokens.size());
      if (s.tokens.empty() || first_draft != verify_draft) {
        return absl::InvalidArgumentError(fmt::format(
            "slot {}: its drafts are for positions from {} but its forward takes drafts at position {}", s.slot,
            first_draft, verify_draft));
      }
    }
    RETURN_IF_ERROR(CheckIds(limits, s.slot, s.tokens));
    RETURN_IF_ERROR(CheckPages(limits, s.slot, s.kv_pages));
  }
  if (limits.max_step_tokens > 0 && plan.num_tokens() > limits.max_step_tokens) {
    return absl::InvalidArgumentError(fmt::format("a step of {} tokens exceeds the runner's limit of {} per step",
                                                  plan.num_tokens(), limits.max_step_tokens));
  }
  if (!plan.sampling.empty() && static_cast<int64_t>(plan.sampling.size()) != LogitRows(plan)) {
    return absl::InvalidArgumentError(fmt::format("the step samples {} rows but its forward has {} logit rows",
                                                  plan.sampling.size(), LogitRows(plan)));
  }
  const TokenMasks& m = plan.masks;
  if (!m.words.empty() || m.words_per_row != 0) {
    if (m.words_per_row != (limits.vocab_size + 31) / 32 || m.words.size() % static_cast<size_t>(m.words_per_row) != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "the step's token masks have {} words of {} per row; the vocabulary of {} needs {} per row", m.words.size(),
          m.words_per_row, limits.vocab_size, (limits.vocab_size + 31) / 32));
    }
  }
  for (size_t r = 0; r < plan.sampling.size(); ++r) {
    const int32_t row = plan.sampling[r].mask_row;
    if (row < -1 || row >= m.rows()) {
      return absl::InvalidArgumentError(
          fmt::format("sampled row {} names token mask {} of the step's {}", r, row, m.rows()));
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model
