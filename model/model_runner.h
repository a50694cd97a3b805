// ModelRunner: one tensor-parallel rank's shard of the model on one device, running StepPlans.
// Implementations: the CPU reference (model/cpu/) and CUDA (model/cuda/). The engine and the node
// daemon see only this interface: every rank of a group runs the same plans in the same order.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/capacity.h"
#include "model/row_sampling.h"
#include "model/step_plan.h"

namespace sparkserve::model {

struct StepOutput {
  // Logits of the requested positions, rows in plan order (for each seq: 0, 1 or n rows).
  core::Tensor logits;                 // f32 [num_logit_rows, vocab]
  std::vector<int32_t> logit_row_begin;  // per seq: first row in `logits` (size seqs + 1, prefix sums)
  // Hidden state of each logit row AFTER the final norm (the lm_head input): what MTP takes as the
  // target hidden (vLLM qwen3_5_mtp / Qwen3NextModel.forward hand the normed hidden to the drafter).
  core::Tensor hidden;                 // f32 [num_logit_rows, hidden] (CPU runner; may be undefined)
  // The same (after the final norm) for each seq's last token, whatever `logits` it asked for.
  core::Tensor last_hidden;            // f32 [num_seqs, hidden] (CPU runner; may be undefined)
  // Sampling on the device (plan.sampling given): one entry per logit row. `logits` then holds only
  // the rows whose status is not kDone (the others are left unwritten).
  std::vector<SampledRow> sampled;
  // Per DraftWork of the plan: its num_drafts greedy draft tokens.
  std::vector<std::vector<int32_t>> drafts;
  // Per DraftWork asking kAll: the MTP logits of its positions then its draft steps (n + num_drafts
  // - 1 rows each), in plan order.
  core::Tensor draft_logits;           // f32 [rows, vocab]
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual ModelCapacity capacity() const = 0;
  // Runs one step (model/step_plan.h). Each seq's state slot must hold exactly `start_pos` tokens of
  // history (start_pos == 0 resets the slot). Invalid plans fail before any state changes.
  virtual absl::StatusOr<StepOutput> Run(const StepPlan& plan) = 0;
  // Whether Run samples the logit rows on the runner's device when plan.sampling is given (the
  // engine then sends RowSamplings and samples on the host only the rows the device leaves).
  virtual bool samples_on_device() const { return false; }
  // Whether the checkpoint's MTP block is loaded (DraftWork needs it).
  virtual bool has_mtp() const { return false; }
};

}  // namespace sparkserve::model
