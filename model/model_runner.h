// ModelRunner: one tensor-parallel rank's shard of the model on one device, running StepPlans.
// Implementations: CPU reference (model/cpu_*), CUDA (later). The engine sees only this interface.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/row_sampling.h"
#include "model/step_plan.h"

namespace sparkserve::model {

struct StepOutput {
  // Logits of the requested positions, rows in plan order (for each seq: 0, 1 or n rows).
  core::Tensor logits;                 // f32 [num_logit_rows, vocab]
  std::vector<int32_t> logit_row_begin;  // per seq: first row in `logits` (size seqs + 1, prefix sums)
  // Hidden state of each logit row AFTER the final norm (the lm_head input). This is what MTP
  // takes as the target hidden (vLLM qwen3_5_mtp / Qwen3NextModel.forward return the normed
  // hidden to the drafter); after a verify, the row of the last accepted column seeds the next draft.
  core::Tensor hidden;                 // f32 [num_logit_rows, hidden]
  // The same (after the final norm) for each seq's last token, whatever `logits` it asked for.
  core::Tensor last_hidden;            // f32 [num_seqs, hidden]
  // ForwardSampled only: one entry per logit row. `logits` then holds only the rows whose status
  // is not kDone (the others are left unwritten).
  std::vector<SampledRow> sampled;
};

// Capacities the scheduler plans against.
struct ModelCapacity {
  int32_t num_slots = 0;       // GDN/conv state slots (= max running sequences)
  int32_t num_kv_pages = 0;    // KV pages in the pool
  int32_t kv_page_size = 0;    // tokens per page
  int32_t vocab_size = 0;
  int32_t max_seq_len = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual ModelCapacity capacity() const = 0;
  // Runs one step. Each seq's state slot must hold exactly `start_pos` tokens of history
  // (start_pos == 0 resets the slot).
  virtual absl::StatusOr<StepOutput> Forward(const StepPlan& plan) = 0;
  // Copies the state of slot `src` into `dst` (GDN state + conv window), e.g. for n > 1 forks.
  virtual absl::Status CopySlot(SlotId src, SlotId dst) = 0;

  // Runners that sample on their device: Forward, then sample logit row r with rows[r] (one per
  // logit row; every seq must want kLast or kNone logits). The engine uses it when true.
  virtual bool samples_on_device() const { return false; }
  virtual absl::StatusOr<StepOutput> ForwardSampled(const StepPlan& plan, const std::vector<RowSampling>& rows) {
    return absl::UnimplementedError("this model runner does not sample on its device");
  }
};

}  // namespace sparkserve::model
