// CpuModelRunner: step validation; copies, commits, MTP drafts; embedding -> layers -> final norm ->
// lm_head.
#include "model/cpu/cpu_model_runner.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "model/cpu/cpu_layers.h"
#include "model/step_validation.h"

namespace sparkserve::model::cpu {

namespace k = kernels::cpu;

CpuModelRunner::CpuModelRunner(const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan,
                               core::Collective* collective, const CpuRunnerOptions& options)
    : config_(config),
      weights_(std::move(weights)),
      plan_(plan),
      shapes_(RankShapes::Of(config, plan)),
      collective_(collective ? collective : &single_),
      options_(options),
      state_(config, shapes_, options.state, weights_.mtp.present) {}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::Create(
    const Qwen35Config& config, Qwen35Weights weights, const ShardPlan& plan, core::Collective* collective,
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
          static_cast<int32_t>(config_.vocab_size), options_.max_seq_len, options_.state.max_verify_tokens};
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
  l.has_mtp = weights_.mtp.present;
  l.prev_step_rows = prev_rows_;
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

absl::StatusOr<StepOutput> CpuModelRunner::Run(const StepPlan& plan) {
  RETURN_IF_ERROR(ValidateStepPlan(limits(), plan));
  for (const ColumnCommit& c : plan.commits) {
    const int32_t pending = state_.pending_columns()[static_cast<size_t>(c.slot)];
    if (pending == 0) {
      return absl::FailedPreconditionError(
          fmt::format("column commit: slot {} has no verify forward (keep_column_states) pending", c.slot));
    }
    if (c.accepted > pending) {
      return absl::InvalidArgumentError(
          fmt::format("column commit: slot {} accepted {} of {} verified columns", c.slot, c.accepted, pending));
    }
  }
  // Inputs are valid: from here on the step mutates state.
  for (const SlotCopy& c : plan.copies) state_.CopySlot(c.src, c.dst);
  for (const PageCopy& c : plan.page_copies) state_.CopyPage(c.src, c.dst);
  for (const ColumnCommit& c : plan.commits) state_.KeepColumn(c.slot, c.accepted - 1);
  StepOutput drafted;
  RETURN_IF_ERROR(RunDrafts(plan.drafts, &drafted));
  if (plan.seqs.empty()) {  // no forward: the last forward's rows stay for later drafts
    drafted.logit_row_begin = {0};
    return drafted;
  }
  ASSIGN_OR_RETURN(StepOutput out, Forward(plan, drafted.drafts));
  out.drafts = std::move(drafted.drafts);
  out.draft_logits = std::move(drafted.draft_logits);
  return out;
}

absl::StatusOr<StepOutput> CpuModelRunner::Forward(const StepPlan& plan,
                                                   const std::vector<std::vector<int32_t>>& drafts) {
  const int64_t d = config_.hidden_size;
  BatchView batch;
  std::vector<int32_t> tokens;
  for (const SeqWork& s : plan.seqs) {
    const int64_t n = s.num_tokens();
    batch.seqs.push_back({batch.num_tokens, n, s.start_pos});
    for (int64_t i = 0; i < n; ++i) batch.positions.push_back(s.start_pos + static_cast<int32_t>(i));
    batch.pages.emplace_back(s.kv_pages);
    batch.slots.push_back(s.slot);
    batch.keep_columns.push_back(s.keep_column_states ? 1 : 0);
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    if (s.num_drafts > 0) {  // this step's drafts of its slot (validated: one DraftWork, as many)
      for (size_t i = 0; i < plan.drafts.size(); ++i) {
        if (plan.drafts[i].slot == s.slot) tokens.insert(tokens.end(), drafts[i].begin(), drafts[i].end());
      }
    }
    batch.num_tokens += n;
  }
  const int64_t T = batch.num_tokens;
  std::vector<float> residual(T * d);
  RETURN_IF_ERROR(k::EmbeddingGather(weights_.embed_tokens.data<float>(), config_.vocab_size, d, tokens,
                                     residual.data()));
  for (const SeqWork& s : plan.seqs) {
    if (s.start_pos == 0) state_.ResetSlot(s.slot);
    state_.pending_columns()[static_cast<size_t>(s.slot)] = s.keep_column_states ? s.num_tokens() : 0;
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
  // Every row after the final norm: the logit rows' hidden, and the next step's DraftWork rows.
  const float eps = static_cast<float>(config_.rms_norm_eps);
  prev_hidden_.resize(static_cast<size_t>(T * d));
  k::RmsNormZeroCentered(residual.data(), weights_.final_norm.data<float>(), T, d, eps, prev_hidden_.data());
  prev_rows_ = T;
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
    std::memcpy(out.hidden.data<float>() + r * d, prev_hidden_.data() + logit_rows[r] * d, sizeof(float) * d);
  }
  for (int64_t s = 0; s < S; ++s) {
    const auto& sq = batch.seqs[s];
    std::memcpy(out.last_hidden.data<float>() + s * d, prev_hidden_.data() + (sq.token_begin + sq.num_tokens - 1) * d,
                sizeof(float) * d);
  }
  ASSIGN_OR_RETURN(out.logits, LmHead(out.hidden.data<float>(), R));
  return out;
}

absl::Status CpuModelRunner::MtpForward(const std::vector<MtpSeqWork>& seqs, core::Tensor* logits,
                                        core::Tensor* hidden, const std::vector<int64_t>* logit_rows) {
  const int64_t d = config_.hidden_size;
  const MtpWeights& m = weights_.mtp;
  BatchView batch;
  std::vector<int32_t> tokens;
  for (const MtpSeqWork& s : seqs) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
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
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    std::memcpy(hid.data() + row * d, s.hidden, sizeof(float) * n * d);
    row += n;
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
  *hidden = core::Tensor::Empty({T, d}, core::DType::kF32);
  k::RmsNormZeroCentered(x.data(), m.norm.data<float>(), T, d, eps, hidden->data<float>());
  if (logit_rows == nullptr) {
    ASSIGN_OR_RETURN(*logits, LmHead(hidden->data<float>(), T));
    return absl::OkStatus();
  }
  // Only the rows asked for: teacher forcing over a prompt needs none of its lm_head rows.
  const auto R = static_cast<int64_t>(logit_rows->size());
  std::vector<float> rows(static_cast<size_t>(R * d));
  for (int64_t r = 0; r < R; ++r) {
    std::memcpy(rows.data() + r * d, hidden->data<float>() + (*logit_rows)[static_cast<size_t>(r)] * d,
                sizeof(float) * d);
  }
  ASSIGN_OR_RETURN(*logits, LmHead(rows.data(), R));
  return absl::OkStatus();
}

absl::Status CpuModelRunner::RunDrafts(const std::vector<DraftWork>& drafts, StepOutput* out) {
  out->drafts.assign(drafts.size(), {});
  if (drafts.empty()) return absl::OkStatus();
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  // Teacher-forced positions of every work in one MTP forward, their hidden from the previous step.
  std::vector<MtpSeqWork> work;
  for (const DraftWork& w : drafts) {
    work.push_back({w.slot, w.start_pos, w.tokens, prev_hidden_.data() + static_cast<int64_t>(w.hidden_row) * d,
                    w.kv_pages});
  }
  // Logits only where wanted: every position of a kAll work, the last one of a work that drafts.
  std::vector<int64_t> logit_rows;
  std::vector<int64_t> first_logit(drafts.size(), 0);
  std::vector<uint8_t> has_logits(drafts.size(), 0);
  int64_t row = 0;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(drafts[i].tokens.size());
    const int64_t from = drafts[i].logits == LogitsWanted::kAll ? 0 : drafts[i].num_drafts > 0 ? n - 1 : n;
    first_logit[i] = static_cast<int64_t>(logit_rows.size()) - from;
    has_logits[i] = from < n ? 1 : 0;
    for (int64_t t = from; t < n; ++t) logit_rows.push_back(row + t);
    row += n;
  }
  core::Tensor logits, hidden;
  RETURN_IF_ERROR(MtpForward(work, &logits, &hidden, &logit_rows));
  // kAll works: every position's logits, then each draft step's (appended below).
  std::vector<std::vector<float>> kept(drafts.size());
  std::vector<const float*> last_logits(drafts.size(), nullptr), last_hidden(drafts.size());
  row = 0;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(drafts[i].tokens.size());
    const int64_t l = first_logit[i];  // logits row of its position 0 (those before it are absent)
    if (drafts[i].logits == LogitsWanted::kAll) {
      kept[i].assign(logits.data<float>() + l * V, logits.data<float>() + (l + n) * V);
    }
    if (has_logits[i]) last_logits[i] = logits.data<float>() + (l + n - 1) * V;
    last_hidden[i] = hidden.data<float>() + (row + n - 1) * d;
    row += n;
  }
  // Greedy draft steps: draft 0 from the last teacher-forced position, draft j from one more MTP
  // step on draft j - 1 and the previous step's MTP hidden (the argmax among the draft vocabulary).
  const int64_t draft_vocab = options_.draft_vocab > 0 ? std::min<int64_t>(options_.draft_vocab, V) : V;
  int32_t most = 0;
  for (const DraftWork& w : drafts) most = std::max(most, w.num_drafts);
  core::Tensor step_logits, step_hidden;  // keep the previous step's rows alive
  for (int32_t j = 0; j < most; ++j) {
    std::vector<MtpSeqWork> next;
    std::vector<size_t> who;
    for (size_t i = 0; i < drafts.size(); ++i) {
      if (j >= drafts[i].num_drafts) continue;
      const int32_t tok = k::Argmax(last_logits[i], draft_vocab);
      out->drafts[i].push_back(tok);
      if (j + 1 < drafts[i].num_drafts) {
        const int32_t pos = drafts[i].start_pos + static_cast<int32_t>(drafts[i].tokens.size()) + j;
        next.push_back({drafts[i].slot, pos, {tok}, last_hidden[i], drafts[i].kv_pages});
        who.push_back(i);
      }
    }
    if (next.empty()) break;
    core::Tensor l, h;
    RETURN_IF_ERROR(MtpForward(next, &l, &h));
    for (size_t r = 0; r < who.size(); ++r) {
      const size_t i = who[r];
      const float* lr = l.data<float>() + static_cast<int64_t>(r) * V;
      if (drafts[i].logits == LogitsWanted::kAll) kept[i].insert(kept[i].end(), lr, lr + V);
      last_logits[i] = lr;
      last_hidden[i] = h.data<float>() + static_cast<int64_t>(r) * d;
    }
    step_logits = std::move(l);
    step_hidden = std::move(h);
  }
  int64_t rows = 0;
  for (const auto& k_rows : kept) rows += static_cast<int64_t>(k_rows.size()) / V;
  if (rows > 0) {
    out->draft_logits = core::Tensor::Empty({rows, V}, core::DType::kF32);
    float* dst = out->draft_logits.data<float>();
    for (const auto& k_rows : kept) {
      std::copy(k_rows.begin(), k_rows.end(), dst);
      dst += k_rows.size();
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cpu
