// CpuModelRunner: the fp32 reference ModelRunner for Qwen3.5 on one tensor-parallel rank
// (tp = 1 is the same code with a single-rank collective). Run executes every operation of a
// StepPlan: slot copies, verify commits, MTP drafts (the MTP block over the previous step's target
// hidden states, with its own KV pool on the same page ids as the target's pages), and the forward of
// a ragged batch mixing prefill chunks, decode steps and verify columns. Sampling is the engine's.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/activation_observer.h"
#include "core/collective.h"
#include "model/config.h"
#include "model/model_runner.h"
#include "model/qwen35_state.h"
#include "model/qwen35_weights.h"
#include "model/shard_plan.h"
#include "model/step_validation.h"

namespace sparkserve::model::cpu {

struct CpuRunnerOptions {
  StateOptions state;
  int32_t max_seq_len = 4096;
  // Round the KV cache's values to bf16 and every linear's input rows (lm_head's too) to f16, as the
  // CUDA backend does, so that a comparison with it measures everything else; off for the reference.
  bool kv_bf16 = false;
  bool linear_inputs_f16 = false;
  // MTP drafts are the greedy token among ids [0, draft_vocab) (0: the whole vocabulary).
  int32_t draft_vocab = 0;
};

// One sequence's share of an MTP forward: position start_pos + i takes the embedding of
// tokens[i] (the token AFTER that position) and hidden[i] (the target's normed hidden at that
// position, or the MTP's own output hidden for later draft steps).
struct MtpSeqWork {
  SlotId slot = 0;
  int32_t start_pos = 0;
  std::vector<int32_t> tokens;
  const float* hidden = nullptr;  // [tokens.size(), hidden]
  std::vector<int32_t> kv_pages;  // covers [0, start_pos + n)
};

class CpuModelRunner : public ModelRunner {
 public:
  // `collective` (null for one rank) must outlive the runner; its rank/world must match `plan`.
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> Create(const Qwen35Config& config,
                                                                Qwen35Weights weights,
                                                                const ShardPlan& plan,
                                                                core::Collective* collective,
                                                                const CpuRunnerOptions& options);

  ModelCapacity capacity() const override;
  absl::StatusOr<StepOutput> Run(const StepPlan& plan) override;
  bool has_mtp() const override { return weights_.mtp.present; }

  // Calibration hook: every later step reports Linear inputs and K/V writes to
  // `observer` (not owned; null turns it off, the default).
  void set_activation_observer(ActivationObserver* observer) { observer_ = observer; }

  const Qwen35Config& config() const { return config_; }
  const Qwen35Weights& weights() const { return weights_; }
  Qwen35State& state() { return state_; }

 private:
  CpuModelRunner(const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan,
                 core::Collective* collective, const CpuRunnerOptions& options);
  StepLimits limits() const;
  // lm_head over rows [R, d] -> full-vocab logits [R, vocab] (gathered across ranks).
  absl::StatusOr<core::Tensor> LmHead(const float* rows, int64_t R);
  // The plan's forward; `drafts` holds each DraftWork's tokens (the inputs of verify seqs).
  absl::StatusOr<StepOutput> Forward(const StepPlan& plan, const std::vector<std::vector<int32_t>>& drafts);
  // The MTP block over teacher-forced positions: logits [rows, vocab] and the mtp.norm output
  // [rows, hidden] (the next draft step's hidden), rows in seq order.
  // `logit_rows`: the token rows whose logits are wanted (logits row r is token row logit_rows[r]);
  // null: every row.
  absl::Status MtpForward(const std::vector<MtpSeqWork>& seqs, core::Tensor* logits, core::Tensor* hidden,
                          const std::vector<int64_t>* logit_rows = nullptr);
  // The plan's DraftWork: draft tokens into out->drafts, logits of kAll works into out->draft_logits.
  absl::Status RunDrafts(const std::vector<DraftWork>& drafts, StepOutput* out);

  Qwen35Config config_;
  Qwen35Weights weights_;
  ShardPlan plan_;
  RankShapes shapes_;
  core::SingleRankCollective single_;
  core::Collective* collective_;
  CpuRunnerOptions options_;
  Qwen35State state_;
  ActivationObserver* observer_ = nullptr;
  // The previous forward's target hidden (after the final norm) of every token row, for DraftWork.
  std::vector<float> prev_hidden_;  // [prev_rows, hidden]
  int64_t prev_rows_ = 0;
};

}  // namespace sparkserve::model::cpu
