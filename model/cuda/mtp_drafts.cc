// CudaModelRunner's MTP drafting (StepPlan::drafts, FORMATS.md §2), as CpuModelRunner::RunDrafts
// does it: one MTP pass over every work's teacher-forced positions (their K/V into the MTP layer's
// pages), then one pass per draft step over the works still drafting, one token each. Drafts are
// the greedy tokens of the MTP logits, drawn on the GPU (over the split vocabulary under tensor
// parallelism, so every rank drafts the same tokens), or among ids [0, --draft-vocab) through a draft
// head of those lm_head rows; only the ids cross to the host, once a draft step.
#include <algorithm>
#include <vector>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/norm_ops.h"
#include "model/cuda/cuda_model_runner.h"
#include "quant/checkpoint.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

namespace {

// One work's share of an MTP pass: position start_pos + i takes tokens[i] and the hidden at source
// row hidden_row + i.
struct PassSeq {
  size_t work = 0;                    // index of its DraftWork
  int32_t start_pos = 0;
  std::vector<int32_t> tokens;
  int32_t hidden_row = 0;
  bool all_logits = false;            // its logits of every position go to the host (kAll)
  bool drafts = false;                // its last position's greedy token is a draft
};

}  // namespace

absl::Status CudaModelRunner::EnqueueMtpPass(int S, int T, int max_seq_tokens, const float* hidden_src) {
  const CudaMtpWeights& m = weights_.mtp;
  const int d = static_cast<int>(config_.hidden_size);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const int32_t* meta = mtp_meta_device_.data();
  // fc input rows [norm(embedding) | norm(hidden)] in f16. The hidden source may be mtp_out_ (a draft
  // step reads the pass before it): it is gathered before this pass overwrites it.
  RETURN_IF_ERROR(kc::EmbeddingGather(weights_.embed_tokens.data(), config_.vocab_size, d, meta + meta_.tokens, T,
                                      residual_.data(), stream_));
  RETURN_IF_ERROR(kc::RmsNormZeroCentered(residual_.data(), m.pre_fc_norm_embedding.data(), T, d, eps, nullptr,
                                          act16_.data(), stream_));
  RETURN_IF_ERROR(kc::GatherRows(hidden_src, d, meta + meta_.hidden_rows, T, delta_.data(), stream_));
  RETURN_IF_ERROR(kc::RmsNormZeroCentered(delta_.data(), m.pre_fc_norm_hidden.data(), T, d, eps, nullptr,
                                          mtp_hidden16_.data(), stream_));
  const size_t row = static_cast<size_t>(d) * sizeof(__half);
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(mtp_cat16_.data(), 2 * row, act16_.data(), row, row, static_cast<size_t>(T),
                                         cudaMemcpyDeviceToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(mtp_cat16_.data() + d, 2 * row, mtp_hidden16_.data(), row, row,
                                         static_cast<size_t>(T), cudaMemcpyDeviceToDevice, stream_));
  // fc (replicated: every rank has the whole layer input), then the MTP's decoder layer, mtp.norm.
  RETURN_IF_ERROR(RunLinear(m.fc, mtp_cat16_.data(), T, residual_.data()));
  RETURN_IF_ERROR(kc::RmsNormZeroCentered(residual_.data(), m.layer.input_layernorm.data(), T, d, eps, nullptr,
                                          act16_.data(), stream_));
  const kc::RaggedBatchDevice batch = BatchOf(mtp_meta_device_, S, T, max_seq_tokens);
  RETURN_IF_ERROR(EnqueueAttention(m.layer.attn, KvPool(num_attention_layers_), batch, T,
                                   m.layer.post_attention_layernorm.data()));
  RETURN_IF_ERROR(EnqueueMlp(m.layer.mlp, T, nullptr));
  return kc::AddRmsNormZeroCentered(residual_.data(), delta_.data(), m.norm.data(), T, d, eps, mtp_out_.data(), nullptr,
                                    stream_);
}

absl::Status CudaModelRunner::InitDraftHead(const quant::Checkpoint& shard) {
  const int64_t V = config_.vocab_size, d = config_.hidden_size, N = options_.draft_vocab;
  if (N <= 0 || N >= V) return absl::OkStatus();  // the whole lm_head
  if (tp()) {
    return absl::InvalidArgumentError(fmt::format(
        "--draft-vocab {}: a draft vocabulary is not supported under tensor parallelism yet (the lm_head rows "
        "are split across the ranks); leave it out with --nodes",
        N));
  }
  if (config_.tie_word_embeddings) {  // rows [0, N) of the embedding, already on the device
    draft_head_ = CudaLinear::Bf16View(weights_.embed_tokens.data(), static_cast<int>(N), static_cast<int>(d),
                                       "draft_lm_head");
    return absl::OkStatus();
  }
  const quant::QuantizedLinear* head = shard.FindModule("lm_head");
  if (head == nullptr) return absl::NotFoundError("checkpoint has no lm_head.weight for the draft head");
  ASSIGN_OR_RETURN(core::Tensor all, head->DequantizeToF32());  // [V, d]
  core::Tensor rows = core::Tensor::Empty({N, d}, core::DType::kF32);
  std::copy_n(all.data<float>(), N * d, rows.data<float>());
  ASSIGN_OR_RETURN(draft_head_, CudaLinear::FromF32(rows, "draft_lm_head"));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::RunDrafts(const std::vector<DraftWork>& drafts, StepOutput* out) {
  out->drafts.assign(drafts.size(), {});
  if (drafts.empty()) return absl::OkStatus();
  const int64_t V = config_.vocab_size;
  std::vector<std::vector<float>> kept(drafts.size());  // kAll works: positions' logits, then draft steps'
  std::vector<int32_t> last_row(drafts.size(), 0);      // each work's last row in mtp_out_
  std::vector<int32_t> drafted(drafts.size(), 0);       // each work's greedy token of the pass just run

  // One MTP pass over `seqs`, hidden rows from `hidden_src`: kAll rows to `kept`, greedy tokens of
  // the drafting seqs' last rows to `drafted`.
  auto pass = [&](const std::vector<PassSeq>& seqs, const float* hidden_src) -> absl::Status {
    int32_t* m = mtp_meta_host_;
    const int S = static_cast<int>(seqs.size());
    int T = 0, max_seq_tokens = 1;
    std::vector<int32_t> sample_rows, all_rows;
    m[meta_.token_begin] = 0;
    for (int s = 0; s < S; ++s) {
      const PassSeq& q = seqs[static_cast<size_t>(s)];
      const DraftWork& w = drafts[q.work];
      const int n = static_cast<int>(q.tokens.size());
      for (int i = 0; i < n; ++i) {
        m[meta_.tokens + T + i] = q.tokens[static_cast<size_t>(i)];
        m[meta_.token_seq + T + i] = s;
        m[meta_.positions + T + i] = q.start_pos + i;
        m[meta_.hidden_rows + T + i] = q.hidden_row + i;
        if (q.all_logits) all_rows.push_back(T + i);
      }
      if (q.drafts) sample_rows.push_back(T + n - 1);
      m[meta_.start_pos + s] = q.start_pos;
      m[meta_.slots + s] = w.slot;
      reinterpret_cast<uint8_t*>(m + meta_.keep_columns)[s] = 0;
      const size_t pages = std::min(w.kv_pages.size(), static_cast<size_t>(pages_stride_));
      std::copy_n(w.kv_pages.begin(), pages, m + meta_.page_table + static_cast<size_t>(s) * pages_stride_);
      T += n;
      m[meta_.token_begin + s + 1] = T;
      m[meta_.last_rows + s] = T - 1;
      last_row[q.work] = T - 1;
      max_seq_tokens = std::max(max_seq_tokens, n);
    }
    // Logit rows: the drafting rows first (sampled together), then the kAll rows.
    const int drafting = static_cast<int>(sample_rows.size());
    std::copy(sample_rows.begin(), sample_rows.end(), m + meta_.logit_rows);
    std::copy(all_rows.begin(), all_rows.end(), m + meta_.logit_rows + drafting);
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(mtp_meta_device_.data(), mtp_meta_host_, meta_.total * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream_));
    RETURN_IF_ERROR(EnqueueMtpPass(S, T, max_seq_tokens, hidden_src));
    const int32_t* logit_rows = mtp_meta_device_.data() + meta_.logit_rows;
    if (!all_rows.empty()) {  // kAll: whole rows to the host, in seq order
      std::vector<float> rows(all_rows.size() * static_cast<size_t>(V));
      for (int r = 0; r < static_cast<int>(all_rows.size()); r += logit_chunk_rows_) {
        const int n = std::min(logit_chunk_rows_, static_cast<int>(all_rows.size()) - r);
        RETURN_IF_ERROR(EnqueueHead(mtp_out_.data(), logit_rows + drafting + r, n));
        RETURN_IF_ERROR(FetchLogitRows(n, rows.data() + static_cast<size_t>(r) * V));
      }
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      size_t at = 0;
      for (const PassSeq& q : seqs) {
        if (!q.all_logits) continue;
        const size_t count = q.tokens.size() * static_cast<size_t>(V);
        kept[q.work].insert(kept[q.work].end(), rows.begin() + at, rows.begin() + at + count);
        at += count;
      }
    }
    if (drafting == 0) return absl::OkStatus();  // only the MTP's KV filled: no wait
    std::vector<RowSampling> greedy(static_cast<size_t>(drafting));
    for (RowSampling& r : greedy) r.temperature = 0.0f;
    StepOutput sampled;
    if (draft_head_.out() > 0) {  // the draft vocabulary's rows only (one rank)
      RETURN_IF_ERROR(EnqueueHead(mtp_out_.data(), logit_rows, drafting, &draft_head_));
      RETURN_IF_ERROR(EnsureSampler());
      RETURN_IF_ERROR(sampler_->Upload(greedy, stream_));
      RETURN_IF_ERROR(sampler_->Sample(logits_.data(), draft_head_.out(), nullptr, stream_));
      RETURN_IF_ERROR(sampler_->EnqueueResults(stream_));
      RETURN_IF_ERROR(Sync());
      sampled.sampled = sampler_->Results();
    } else {
      RETURN_IF_ERROR(EnqueueHead(mtp_out_.data(), logit_rows, drafting));
      RETURN_IF_ERROR(SampleOnDevice(greedy, {}, &sampled));
    }
    size_t r = 0;
    for (const PassSeq& q : seqs) {
      if (!q.drafts) continue;
      const SampledRow& row = sampled.sampled[r++];
      if (row.status != SampledRow::kDone) {
        return absl::InternalError(fmt::format("MTP draft logits of slot {} have no finite value",
                                               drafts[q.work].slot));
      }
      drafted[q.work] = row.id;
    }
    return absl::OkStatus();
  };

  std::vector<PassSeq> seqs;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const DraftWork& w = drafts[i];
    seqs.push_back({i, w.start_pos, w.tokens, w.hidden_row, w.logits == LogitsWanted::kAll, w.num_drafts > 0});
  }
  RETURN_IF_ERROR(pass(seqs, normed_.data()));  // the previous forward's normed rows
  // Draft j is the greedy token of the pass before; draft j + 1 needs one more pass at the position
  // after, on draft j and that pass's MTP hidden.
  int32_t most = 0;
  for (const DraftWork& w : drafts) most = std::max(most, w.num_drafts);
  for (int32_t j = 0; j < most; ++j) {
    std::vector<PassSeq> next;
    for (size_t i = 0; i < drafts.size(); ++i) {
      const DraftWork& w = drafts[i];
      if (j >= w.num_drafts) continue;
      out->drafts[i].push_back(drafted[i]);
      if (j + 1 < w.num_drafts) {
        const int32_t pos = w.start_pos + static_cast<int32_t>(w.tokens.size()) + j;
        next.push_back({i, pos, {drafted[i]}, last_row[i], w.logits == LogitsWanted::kAll, true});
      }
    }
    if (next.empty()) break;
    RETURN_IF_ERROR(pass(next, mtp_out_.data()));
  }
  size_t total = 0;
  for (const auto& k : kept) total += k.size();
  if (total > 0) {
    out->draft_logits = core::Tensor::Empty({static_cast<int64_t>(total) / V, V}, core::DType::kF32);
    float* dst = out->draft_logits.data<float>();
    for (const auto& k : kept) dst = std::copy(k.begin(), k.end(), dst);
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
