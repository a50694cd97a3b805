// Validation of a StepPlan against a runner's limits, shared by every ModelRunner so that each
// backend refuses the same bad steps with the same messages before touching any state.
#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "model/step_plan.h"

namespace sparkserve::model {

struct StepLimits {
  int32_t num_slots = 0;
  int32_t max_seq_len = 0;
  int32_t kv_page_size = 0;
  int32_t num_kv_pages = 0;
  bool needs_kv = true;            // the model has attention layers (or MTP) that read KV pages
  int32_t max_verify_tokens = 0;   // most tokens of a keep_column_states seq (0: not supported)
  int64_t vocab_size = 0;
  int64_t max_step_tokens = 0;     // 0: no limit
  bool has_mtp = false;            // DraftWork needs the MTP block
  int64_t prev_step_rows = 0;      // token rows the previous forward left (DraftWork::hidden_row)
};

// One seq's slot, token count, positions and page-table size.
absl::Status ValidateSeq(const StepLimits& limits, SlotId slot, int64_t start_pos, size_t num_tokens,
                         size_t num_pages);
// Every operation of the plan: copies and commits name slots in range; drafts have the MTP block,
// hidden rows the previous forward left and pages covering their positions; every seq
// (ValidateSeq) has a distinct slot, token and page ids in range, a verify length within the limit
// and, when it takes drafts, this step's DraftWork of its slot with as many; the step's token
// budget; one RowSampling per logit row when sampling is given; token masks sized for the
// vocabulary, and mask rows the step has.
absl::Status ValidateStepPlan(const StepLimits& limits, const StepPlan& plan);

}  // namespace sparkserve::model
