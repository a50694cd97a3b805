// CpuModelRunner: the fp32 reference ModelRunner for Qwen3.5 on one tensor-parallel rank
// (tp = 1 is the same code with a single-rank collective). Forward runs a ragged StepPlan mixing
// prefill chunks, decode steps and MTP verify columns; the MTP block drafts from the target's
// hidden state with its own KV pool (same page ids as the target's pages).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/activation_observer.h"
#include "model/collective.h"
#include "model/config.h"
#include "model/model_runner.h"
#include "model/qwen35_state.h"
#include "model/qwen35_weights.h"
#include "model/shard_plan.h"
#include "model/step_validation.h"

namespace sparkserve::model {

struct CpuRunnerOptions {
  StateOptions state;
  int32_t max_seq_len = 4096;
  // Round the KV cache's values to bf16 and every linear's input rows (lm_head's too) to f16, as the
  // CUDA backend does, so that a comparison with it measures everything else; off for the reference.
  bool kv_bf16 = false;
  bool linear_inputs_f16 = false;
};

// One sequence's share of an MTP forward: position start_pos + i takes the embedding of
// tokens[i] (the token AFTER that position) and hidden[i] (the target's normed hidden at that
// position, or the MTP's own output hidden for later draft steps).
struct MtpSeqWork {
  SlotId slot = 0;
  int32_t start_pos = 0;
  std::vector<int32_t> tokens;
  core::Tensor hidden;            // f32 [tokens.size(), hidden]
  std::vector<int32_t> kv_pages;  // covers [0, start_pos + n)
};

struct MtpOutput {
  core::Tensor logits;                   // f32 [rows, vocab], one row per token, plan order
  core::Tensor hidden;                   // f32 [rows, hidden]: mtp.norm output (next draft's hidden)
  std::vector<int32_t> row_begin;        // per seq: first row (size seqs + 1)
};

// Greedy k-step draft for one sequence: step 0 at `pos` with `token` (the target's sample after
// pos) and `hidden` (the target's normed hidden at pos); step j at pos + j with the previous
// step's argmax and MTP hidden.
struct DraftSeq {
  SlotId slot = 0;
  int32_t pos = 0;
  int32_t token = 0;
  core::Tensor hidden;            // f32 [hidden]
  std::vector<int32_t> kv_pages;  // covers [0, pos + k)
};

struct DraftOutput {
  std::vector<std::vector<int32_t>> tokens;  // [seq][k] drafted ids
  core::Tensor logits;                       // f32 [seqs * k, vocab], seq-major
};

class CpuModelRunner : public ModelRunner {
 public:
  // `collective` (null for one rank) must outlive the runner; its rank/world must match `plan`.
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> Create(const Qwen35Config& config,
                                                                Qwen35Weights weights,
                                                                const ShardPlan& plan,
                                                                Collective* collective,
                                                                const CpuRunnerOptions& options);

  ModelCapacity capacity() const override;
  absl::StatusOr<StepOutput> Forward(const StepPlan& plan) override;
  absl::Status CopySlot(SlotId src, SlotId dst) override;

  // ---- MTP (FORMATS.md §2) ----
  bool has_mtp() const { return weights_.mtp.present; }
  absl::StatusOr<MtpOutput> MtpForward(const std::vector<MtpSeqWork>& seqs);
  absl::StatusOr<DraftOutput> Draft(const std::vector<DraftSeq>& seqs, int32_t k);
  // After a keep_column_states forward of n columns for `slot`: keeps the GDN/conv state after
  // column accepted - 1 (1 <= accepted <= n). The KV cache needs no rollback.
  absl::Status CommitVerified(SlotId slot, int32_t accepted);

  // Calibration hook: every later Forward/MtpForward reports Linear inputs and K/V writes to
  // `observer` (not owned; null turns it off, the default).
  void set_activation_observer(ActivationObserver* observer) { observer_ = observer; }

  const Qwen35Config& config() const { return config_; }
  const Qwen35Weights& weights() const { return weights_; }
  Qwen35State& state() { return state_; }

 private:
  CpuModelRunner(const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan,
                 Collective* collective, const CpuRunnerOptions& options);
  StepLimits limits() const;
  // lm_head over rows [R, d] -> full-vocab logits [R, vocab] (gathered across ranks).
  absl::StatusOr<core::Tensor> LmHead(const float* rows, int64_t R);

  Qwen35Config config_;
  Qwen35Weights weights_;
  ShardPlan plan_;
  RankShapes shapes_;
  SingleRankCollective single_;
  Collective* collective_;
  CpuRunnerOptions options_;
  Qwen35State state_;
  ActivationObserver* observer_ = nullptr;
};

}  // namespace sparkserve::model
