// CpuModelRunner: step validation, embedding -> layers -> final norm -> lm_head, MTP and commit.
#include "model/cpu_model_runner.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "model/cpu_layers.h"
#include "model/step_validation.h"

namespace sparkserve::model {

namespace k = kernels::cpu;

CpuModelRunner::CpuModelRunner(const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan,
                               Collective* collective, const CpuRunnerOptions& options)
    : config_(config),
      weights_(std::move(weights)),
      plan_(plan),
      shapes_(RankShapes::Of(config, plan)),
      collective_(collective ? collective : &single_),
      options_(options),
      state_(config, shapes_, options.state, weights_.mtp.present) {}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::Create(
    const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan, Collective* collective,
    const CpuRunnerOptions& options) {
  const int32_t world = collective ? collective->world() : 1;
  const int32_t rank = collective ? collective->rank() : 0;
  if (world != plan.world || rank != plan.rank) {
    return absl::InvalidArgumentError(fmt::format("collective is rank {} of {}, shard plan rank {} of {}",
                                                  rank, world, plan.rank, plan.world));
  }
  const auto& s = options.state;
  if (s.num_slots < 1 || s.num_kv_pages < 1 || s.kv_page_size < 1 || s.max_verify_tokens < 1) {
    return absl::InvalidArgumentError("CPU runner needs at least one slot, one KV page of one token, one verify column");
  }
  return std::unique_ptr<CpuModelRunner>(new CpuModelRunner(config, std::move(weights), plan, collective, options));
}

ModelCapacity CpuModelRunner::capacity() const {
  return {options_.state.num_slots, options_.state.num_kv_pages, options_.state.kv_page_size,
          static_cast<int32_t>(config_.vocab_size), options_.max_seq_len};
}

StepLimits CpuModelRunner::limits() const {
  StepLimits l;
  l.num_slots = options_.state.num_slots;
  l.max_seq_len = options_.max_seq_len;
  l.kv_page_size = options_.state.kv_page_size;
  l.num_kv_pages = options_.state.num_kv_pages;
  l.needs_kv = config_.num_full_attention_layers() > 0 || weights_.mtp.present;
  l.max_verify_tokens = options_.state.max_verify_tokens;
  l.vocab_size = config_.vocab_size;
  return l;
}

absl::StatusOr<core::Tensor> CpuModelRunner::LmHead(const float* rows, int64_t R) {
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  const int64_t Vr = shapes_.vocab.second - shapes_.vocab.first;
  core::Tensor logits = core::Tensor::Empty({R, V}, core::DType::kF32);
  if (R == 0) return logits;
  if (observer_ != nullptr) rows = observer_->OnLinearInput("lm_head", rows, R, d);
  std::vector<float> rounded;
  if (options_.linear_inputs_f16) {
    rounded.assign(rows, rows + R * d);
    for (float& v : rounded) v = core::F16ToF32(core::F32ToF16(std::clamp(v, -65504.0f, 65504.0f)));
    rows = rounded.data();
  }
  if (plan_.world == 1) {
    k::Linear(rows, R, d, weights_.lm_head.data<float>(), V, logits.data<float>());
    return logits;
  }
  std::vector<float> local(R * Vr), all;
  k::Linear(rows, R, d, weights_.lm_head.data<float>(), Vr, local.data());
  RETURN_IF_ERROR(collective_->AllGather(local, &all));
  // all = rank-major blocks [R, V_q]; lay them out as columns of [R, V].
  int64_t off = 0;
  for (int32_t q = 0; q < plan_.world; ++q) {
    const Range vq = ShardPlan{q, plan_.world}.Part(V);
    const int64_t w = vq.second - vq.first;
    for (int64_t r = 0; r < R; ++r) {
      std::memcpy(logits.data<float>() + r * V + vq.first, all.data() + off + r * w, sizeof(float) * w);
    }
    off += R * w;
  }
  return logits;
}

absl::StatusOr<StepOutput> CpuModelRunner::Forward(const StepPlan& plan) {
  const int64_t d = config_.hidden_size;
  RETURN_IF_ERROR(ValidateStepPlan(limits(), plan));
  BatchView batch;
  std::vector<int32_t> tokens;
  for (const SeqWork& s : plan.seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    batch.seqs.push_back({batch.num_tokens, n, s.start_pos});
    for (int64_t i = 0; i < n; ++i) batch.positions.push_back(s.start_pos + static_cast<int32_t>(i));
    batch.pages.emplace_back(s.kv_pages);
    batch.slots.push_back(s.slot);
    batch.keep_columns.push_back(s.keep_column_states ? 1 : 0);
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    batch.num_tokens += n;
  }
  const int64_t T = batch.num_tokens;
  std::vector<float> residual(T * d);
  RETURN_IF_ERROR(k::EmbeddingGather(weights_.embed_tokens.data<float>(), config_.vocab_size, d, tokens,
                                     residual.data()));
  // Inputs are valid: from here on the step mutates state.
  for (const SeqWork& s : plan.seqs) {
    if (s.start_pos == 0) state_.ResetSlot(s.slot);
    state_.pending_columns()[static_cast<size_t>(s.slot)] =
        s.keep_column_states ? static_cast<int32_t>(s.tokens.size()) : 0;
  }
  LayerContext ctx{config_, shapes_, state_, *collective_, batch, observer_, {}, options_.kv_bf16,
                   options_.linear_inputs_f16};
  std::string layer_prefix;
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    if (observer_ != nullptr) {
      layer_prefix = fmt::format("{}layers.{}.", config_.weight_prefix(), i);
      ctx.layer_prefix = layer_prefix;
    }
    const int32_t kv_i = state_.kv_index(i);
    k::KvPool pool;
    if (kv_i >= 0) pool = state_.kv(kv_i).pool();
    RETURN_IF_ERROR(DecoderLayerForward(ctx, weights_.layers[static_cast<size_t>(i)],
                                        kv_i >= 0 ? &pool : nullptr, state_.gdn_index(i), residual.data()));
  }
  // Rows that need the final norm: logit rows, then each seq's last row.
  StepOutput out;
  std::vector<int64_t> logit_rows;
  out.logit_row_begin.push_back(0);
  for (size_t s = 0; s < plan.seqs.size(); ++s) {
    const auto& sq = batch.seqs[s];
    if (plan.seqs[s].logits == LogitsWanted::kAll) {
      for (int64_t t = 0; t < sq.num_tokens; ++t) logit_rows.push_back(sq.token_begin + t);
    } else if (plan.seqs[s].logits == LogitsWanted::kLast) {
      logit_rows.push_back(sq.token_begin + sq.num_tokens - 1);
    }
    out.logit_row_begin.push_back(static_cast<int32_t>(logit_rows.size()));
  }
  const int64_t R = static_cast<int64_t>(logit_rows.size()), S = static_cast<int64_t>(plan.seqs.size());
  out.hidden = core::Tensor::Empty({R, d}, core::DType::kF32);
  out.last_hidden = core::Tensor::Empty({S, d}, core::DType::kF32);
  for (int64_t r = 0; r < R; ++r) {
    std::memcpy(out.hidden.data<float>() + r * d, residual.data() + logit_rows[r] * d, sizeof(float) * d);
  }
  for (int64_t s = 0; s < S; ++s) {
    const auto& sq = batch.seqs[s];
    std::memcpy(out.last_hidden.data<float>() + s * d, residual.data() + (sq.token_begin + sq.num_tokens - 1) * d,
                sizeof(float) * d);
  }
  const float eps = static_cast<float>(config_.rms_norm_eps);
  k::RmsNormZeroCentered(out.hidden.data<float>(), weights_.final_norm.data<float>(), R, d, eps, out.hidden.data<float>());
  k::RmsNormZeroCentered(out.last_hidden.data<float>(), weights_.final_norm.data<float>(), S, d, eps,
                         out.last_hidden.data<float>());
  ASSIGN_OR_RETURN(out.logits, LmHead(out.hidden.data<float>(), R));
  return out;
}

absl::Status CpuModelRunner::CopySlot(SlotId src, SlotId dst) {
  const int32_t n = options_.state.num_slots;
  if (src < 0 || src >= n || dst < 0 || dst >= n) {
    return absl::InvalidArgumentError(fmt::format("CopySlot({}, {}): slots are [0, {})", src, dst, n));
  }
  state_.CopySlot(src, dst);
  return absl::OkStatus();
}

absl::Status CpuModelRunner::CommitVerified(SlotId slot, int32_t accepted) {
  if (slot < 0 || slot >= options_.state.num_slots) {
    return absl::InvalidArgumentError(fmt::format("CommitVerified: slot {} out of range", slot));
  }
  const int32_t pending = state_.pending_columns()[static_cast<size_t>(slot)];
  if (pending == 0) {
    return absl::FailedPreconditionError(
        fmt::format("CommitVerified: slot {} has no verify forward (keep_column_states) pending", slot));
  }
  if (accepted < 1 || accepted > pending) {
    return absl::InvalidArgumentError(
        fmt::format("CommitVerified: slot {} accepted {} of {} verified columns (must be 1..{})", slot, accepted,
                    pending, pending));
  }
  state_.KeepColumn(slot, accepted - 1);
  return absl::OkStatus();
}

absl::StatusOr<MtpOutput> CpuModelRunner::MtpForward(const std::vector<MtpSeqWork>& seqs) {
  if (!weights_.mtp.present) return absl::FailedPreconditionError("the checkpoint has no MTP weights (mtp.*)");
  const int64_t d = config_.hidden_size;
  const MtpWeights& m = weights_.mtp;
  BatchView batch;
  std::vector<int32_t> tokens;
  for (const MtpSeqWork& s : seqs) {
    RETURN_IF_ERROR(ValidateSeq(limits(), s.slot, s.start_pos, s.tokens.size(), s.kv_pages.size()));
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (!s.hidden.defined() || s.hidden.dtype() != core::DType::kF32 || s.hidden.numel() != n * d) {
      return absl::InvalidArgumentError(fmt::format("MTP slot {}: hidden must be f32 [{}, {}]", s.slot, n, d));
    }
    batch.seqs.push_back({batch.num_tokens, n, s.start_pos});
    for (int64_t i = 0; i < n; ++i) batch.positions.push_back(s.start_pos + static_cast<int32_t>(i));
    batch.pages.emplace_back(s.kv_pages);
    batch.slots.push_back(s.slot);
    batch.keep_columns.push_back(0);
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    batch.num_tokens += n;
  }
  const int64_t T = batch.num_tokens;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  std::vector<float> emb(T * d), hid(T * d), cat(T * 2 * d), x(T * d);
  RETURN_IF_ERROR(k::EmbeddingGather(weights_.embed_tokens.data<float>(), config_.vocab_size, d, tokens, emb.data()));
  int64_t row = 0;
  for (const MtpSeqWork& s : seqs) {
    std::memcpy(hid.data() + row * d, s.hidden.data<float>(), sizeof(float) * s.hidden.numel());
    row += static_cast<int64_t>(s.tokens.size());
  }
  k::RmsNormZeroCentered(emb.data(), m.pre_fc_norm_embedding.data<float>(), T, d, eps, emb.data());
  k::RmsNormZeroCentered(hid.data(), m.pre_fc_norm_hidden.data<float>(), T, d, eps, hid.data());
  for (int64_t t = 0; t < T; ++t) {  // embedding first, then hidden
    std::memcpy(cat.data() + t * 2 * d, emb.data() + t * d, sizeof(float) * d);
    std::memcpy(cat.data() + t * 2 * d + d, hid.data() + t * d, sizeof(float) * d);
  }
  const float* fc_in = observer_ != nullptr ? observer_->OnLinearInput("mtp.fc", cat.data(), T, 2 * d) : cat.data();
  k::Linear(fc_in, T, 2 * d, m.fc.data<float>(), d, x.data());
  const LayerContext ctx{config_, shapes_, state_, *collective_, batch, observer_, "mtp.layers.0.", options_.kv_bf16,
                         options_.linear_inputs_f16};
  const k::KvPool pool = state_.mtp_kv().pool();
  RETURN_IF_ERROR(DecoderLayerForward(ctx, m.layer, &pool, -1, x.data()));
  MtpOutput out;
  out.hidden = core::Tensor::Empty({T, d}, core::DType::kF32);
  k::RmsNormZeroCentered(x.data(), m.norm.data<float>(), T, d, eps, out.hidden.data<float>());
  ASSIGN_OR_RETURN(out.logits, LmHead(out.hidden.data<float>(), T));
  out.row_begin.push_back(0);
  for (const auto& s : batch.seqs) out.row_begin.push_back(static_cast<int32_t>(s.token_begin + s.num_tokens));
  return out;
}

absl::StatusOr<DraftOutput> CpuModelRunner::Draft(const std::vector<DraftSeq>& seqs, int32_t k) {
  if (k < 1) return absl::InvalidArgumentError(fmt::format("draft length {} < 1", k));
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  const int64_t S = static_cast<int64_t>(seqs.size());
  DraftOutput out;
  out.tokens.assign(seqs.size(), {});
  out.logits = core::Tensor::Empty({S * k, V}, core::DType::kF32);
  std::vector<MtpSeqWork> step(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (!seqs[s].hidden.defined() || seqs[s].hidden.numel() != d) {
      return absl::InvalidArgumentError(fmt::format("draft slot {}: hidden must be f32 [{}]", seqs[s].slot, d));
    }
    step[s] = {seqs[s].slot, seqs[s].pos, {seqs[s].token}, seqs[s].hidden.Clone(), seqs[s].kv_pages};
    RETURN_IF_ERROR(step[s].hidden.Reshape({1, d}).status());
    step[s].hidden = *step[s].hidden.Reshape({1, d});
  }
  for (int32_t j = 0; j < k; ++j) {
    ASSIGN_OR_RETURN(MtpOutput o, MtpForward(step));
    for (size_t s = 0; s < seqs.size(); ++s) {
      const float* row = o.logits.data<float>() + static_cast<int64_t>(s) * V;
      std::memcpy(out.logits.data<float>() + (static_cast<int64_t>(s) * k + j) * V, row, sizeof(float) * V);
      const int32_t tok = k::Argmax(row, V);
      out.tokens[s].push_back(tok);
      step[s].start_pos += 1;
      step[s].tokens = {tok};
      step[s].hidden = o.hidden.Slice(static_cast<int64_t>(s), static_cast<int64_t>(s) + 1).Clone();
    }
  }
  return out;
}

}  // namespace sparkserve::model
