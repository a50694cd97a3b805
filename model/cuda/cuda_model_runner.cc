// CudaModelRunner: load, state and activation buffers (this rank's sizes), the per-step kernel
// sequence (layer_steps.cc), the step's execution (decode graphs in decode_graphs.cc, sampling in
// device_sampling.cc).
#include "model/cuda/cuda_model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/norm_ops.h"
#include "model/memory_plan.h"
#include "model/shard_cuts.h"
#include "quant/activation_quant.h"
#include "quant/checkpoint.h"
#include "spdlog/spdlog.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

namespace {

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Buffer(size_t count, int64_t* total) {
  *total += static_cast<int64_t>(count * sizeof(T));
  return DeviceBuffer<T>::Allocate(std::max<size_t>(count, 1));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Load(const std::string& model_dir,
                                                                       const CudaRunnerOptions& options) {
  ASSIGN_OR_RETURN(Qwen35Config config, LoadQwen35Config(model_dir));
  ASSIGN_OR_RETURN(ShardPlan plan, ShardPlan::Make(0, 1, config));
  ASSIGN_OR_RETURN(quant::Checkpoint full, quant::Checkpoint::Open(model_dir));
  ASSIGN_OR_RETURN(quant::Checkpoint shard, CutShard(full, config, plan));
  return Load(shard, config, plan, nullptr, options);
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Load(const quant::Checkpoint& shard,
                                                                       const Qwen35Config& config,
                                                                       const ShardPlan& plan,
                                                                       core::Collective* collective,
                                                                       const CudaRunnerOptions& options) {
  const int32_t world = collective != nullptr ? collective->world() : 1;
  const int32_t rank = collective != nullptr ? collective->rank() : 0;
  if (world != plan.world || rank != plan.rank) {
    return absl::InvalidArgumentError(fmt::format("CUDA runner: the collective is rank {} of {}, the shard plan rank {} of {}",
                                                  rank, world, plan.rank, plan.world));
  }
  const auto& o = options;
  if (o.num_slots < 1 || o.num_kv_pages < 0 || o.kv_page_size < 1 || o.max_seq_len < 1 || o.max_step_tokens < 1) {
    return absl::InvalidArgumentError(fmt::format(
        "CUDA runner: slots ({}), page size ({}), max_seq_len ({}) and max_step_tokens ({}) must be >= 1 and KV "
        "pages ({}) >= 0", o.num_slots, o.kv_page_size, o.max_seq_len, o.max_step_tokens, o.num_kv_pages));
  }
  if (o.max_step_tokens < o.num_slots) {
    return absl::InvalidArgumentError(fmt::format(
        "CUDA runner: max_step_tokens ({}) must be at least the number of slots ({}) so every sequence can decode in one step",
        o.max_step_tokens, o.num_slots));
  }
  std::unique_ptr<CudaModelRunner> runner(new CudaModelRunner(options));
  runner->config_ = config;
  runner->plan_ = plan;
  runner->shapes_ = RankShapes::Of(config, plan);
  runner->collective_ = plan.world > 1 ? collective : nullptr;
  RETURN_IF_ERROR(runner->Init(shard));
  return runner;
}

CudaModelRunner::~CudaModelRunner() {
  for (auto& [size, graph] : decode_graphs_) DestroyDecodeGraph(graph);
  if (meta_host_ != nullptr) cudaFreeHost(meta_host_);
  if (mtp_meta_host_ != nullptr) cudaFreeHost(mtp_meta_host_);
  if (mask_host_ != nullptr) cudaFreeHost(mask_host_);
  if (gate_fork_ != nullptr) cudaEventDestroy(gate_fork_);
  if (gate_join_ != nullptr) cudaEventDestroy(gate_join_);
  if (gate_stream_ != nullptr) cudaStreamDestroy(gate_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaModelRunner::Init(const quant::Checkpoint& shard) {
  // Diagnostic switch for A/B timing: residual add + norm as its own kernel.
  fused_add_norm_ = std::getenv("SPARKSERVE_CUDA_UNFUSED_NORM") == nullptr;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&gate_stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&gate_fork_, cudaEventDisableTiming));
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&gate_join_, cudaEventDisableTiming));
  std::map<std::string, std::pair<float, float>> kv_scales;  // attention module -> {k_scale, v_scale}
  {
    CudaLinearOptions linear_options;
    linear_options.w4a4_prefill = options_.w4a4_prefill;
    ASSIGN_OR_RETURN(weights_, CudaModelWeights::Load(config_, plan_, shard, linear_options, options_.mtp));
    if (options_.mtp && !weights_.mtp.present) {
      spdlog::warn("cuda runner: MTP asked for, but the checkpoint has no MTP block (mtp.*): no MTP drafts");
    }
    if (options_.kv_dtype == kc::KvDtype::kFp8E4M3) {
      ASSIGN_OR_RETURN(kv_scales, quant::ReadKvScales(shard));
    }
  }
  const auto& c = config_;
  const RankShapes& rs = shapes_;  // this rank's heads and widths (the whole model's at world 1)
  const int64_t d = c.hidden_size, H = rs.heads, KV = rs.kv_heads, hd = c.head_dim;
  const int64_t nk = rs.nk, nv = rs.nv, dk = rs.dk, dv = rs.dv, K = c.linear_conv_kernel_dim, C = rs.conv_channels();
  const int64_t F = rs.ffn, V = c.vocab_size, W = plan_.world;
  vocab_pad_ = (V + W - 1) / W;  // at least every rank's vocab rows (ShardPlan::Part)
  const int64_t S = options_.num_slots, T = options_.max_step_tokens;
  int64_t total = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_full_attention(i)) {  // its KV pool comes last, sized from what memory is left
      gdn_index_.push_back(-1);
      kv_index_.push_back(num_attention_layers_++);
    } else {
      kv_index_.push_back(-1);
      gdn_index_.push_back(static_cast<int32_t>(gdn_.size()));
      GdnState g;
      const size_t state_bytes = kc::GdnStateDtypeBytes(options_.state_dtype);
      ASSIGN_OR_RETURN(g.recurrent, DeviceBuffer<uint8_t>::Zeros(static_cast<size_t>(S * nv * dk * dv) * state_bytes));
      ASSIGN_OR_RETURN(g.conv, DeviceBuffer<float>::Zeros(static_cast<size_t>(S * C * std::max<int64_t>(K - 1, 1))));
      total += static_cast<int64_t>(g.recurrent.bytes() + g.conv.bytes());
      gdn_.push_back(std::move(g));
    }
  }
  {  // verify windows (speculative decoding): per-column copies of every GDN layer's state
    std::vector<float*> states, windows;
    for (GdnState& g : gdn_) {
      states.push_back(reinterpret_cast<float*>(g.recurrent.data()));
      windows.push_back(g.conv.data());
    }
    const int columns = options_.state_dtype == kc::GdnStateDtype::kF32 ? options_.max_verify_tokens : 1;
    RETURN_IF_ERROR(columns_.Init(columns, static_cast<int>(S), states, windows, nv * dk * dv,
                                  C * std::max<int64_t>(K - 1, 1), &total));
  }
  // Step metadata.
  pages_stride_ = (options_.max_seq_len + options_.kv_page_size - 1) / options_.kv_page_size;
  size_t at = 0;
  auto take = [&](size_t n) { const size_t o = at; at += (n + 3) & ~size_t{3}; return o; };  // 16-byte aligned
  meta_.tokens = take(T);
  meta_.token_begin = take(S + 1);
  meta_.start_pos = take(S);
  meta_.token_seq = take(T);
  meta_.positions = take(T);
  meta_.slots = take(S);
  meta_.keep_columns = take((S + 3) / 4);  // bytes
  meta_.page_table = take(static_cast<size_t>(S) * pages_stride_);
  meta_.logit_rows = take(T);
  meta_.last_rows = take(S);
  meta_.hidden_rows = take(T);
  meta_.total = at;
  CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&meta_host_), meta_.total * sizeof(int32_t)));
  std::memset(meta_host_, 0, meta_.total * sizeof(int32_t));
  ASSIGN_OR_RETURN(meta_device_, DeviceBuffer<int32_t>::Zeros(meta_.total));
  if (has_mtp()) {
    CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&mtp_meta_host_), meta_.total * sizeof(int32_t)));
    std::memset(mtp_meta_host_, 0, meta_.total * sizeof(int32_t));
    ASSIGN_OR_RETURN(mtp_meta_device_, DeviceBuffer<int32_t>::Zeros(meta_.total));
    ASSIGN_OR_RETURN(mtp_cat16_, Buffer<__half>(T * 2 * d, &total));
    ASSIGN_OR_RETURN(mtp_hidden16_, Buffer<__half>(T * d, &total));
    ASSIGN_OR_RETURN(mtp_out_, Buffer<float>(T * d, &total));
    RETURN_IF_ERROR(InitDraftHead(shard));
  }
  // Activations.
  logit_chunk_rows_ = static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(S, 32), T));
  const int64_t mid = std::max({H * hd, nv * dv, F});
  ASSIGN_OR_RETURN(residual_, Buffer<float>(T * d, &total));
  ASSIGN_OR_RETURN(delta_, Buffer<float>(T * d, &total));
  ASSIGN_OR_RETURN(normed_, Buffer<float>(T * d, &total));
  ASSIGN_OR_RETURN(act16_, Buffer<__half>(T * d, &total));
  ASSIGN_OR_RETURN(mid16_, Buffer<__half>(T * mid, &total));
  ASSIGN_OR_RETURN(proj0_, Buffer<float>(T * std::max({H * 2 * hd + 2 * KV * hd, C + nv * dv, 2 * F}), &total));
  ASSIGN_OR_RETURN(proj1_, Buffer<float>(T * std::max({KV * hd, nv * dv, F}), &total));
  ASSIGN_OR_RETURN(proj2_, Buffer<float>(T * std::max(KV * hd, nv), &total));
  ASSIGN_OR_RETURN(proj3_, Buffer<float>(T * nv, &total));
  ASSIGN_OR_RETURN(mixed_, Buffer<float>(T * std::max(C, H * hd), &total));
  ASSIGN_OR_RETURN(hidden_, Buffer<float>(static_cast<size_t>(logit_chunk_rows_) * d, &total));
  ASSIGN_OR_RETURN(hidden16_, Buffer<__half>(static_cast<size_t>(logit_chunk_rows_) * d, &total));
  ASSIGN_OR_RETURN(last_hidden_, Buffer<float>(S * d, &total));
  if (tp()) {  // this rank's vocab rows, gathered into whole rows
    ASSIGN_OR_RETURN(logits_, Buffer<float>(static_cast<size_t>(logit_chunk_rows_) * vocab_pad_, &total));
    RETURN_IF_ERROR(kc::CudaStatus(cudaMemset(logits_.data(), 0, logits_.bytes()), "cudaMemset"));
    ASSIGN_OR_RETURN(gathered_, Buffer<float>(static_cast<size_t>(W * logit_chunk_rows_) * vocab_pad_, &total));
    ASSIGN_OR_RETURN(full_logits_, Buffer<float>(static_cast<size_t>(logit_chunk_rows_) * V, &total));
  } else {
    ASSIGN_OR_RETURN(logits_, Buffer<float>(static_cast<size_t>(logit_chunk_rows_) * V, &total));
  }
  size_t ws = weights_.lm_head.workspace_bytes(logit_chunk_rows_);
  auto grow = [&](const CudaLinear& l) { ws = std::max(ws, l.workspace_bytes(static_cast<int>(T))); };
  std::vector<const CudaLayerWeights*> layers;
  for (const CudaLayerWeights& l : weights_.layers) layers.push_back(&l);
  if (has_mtp()) {
    layers.push_back(&weights_.mtp.layer);
    grow(weights_.mtp.fc);
  }
  for (const CudaLayerWeights* l : layers) {
    for (const CudaLinear* lin : {&l->attn.qkv, &l->attn.q_proj, &l->attn.k_proj, &l->attn.v_proj, &l->attn.o_proj,
                                  &l->gdn.qkvz, &l->gdn.in_proj_qkv, &l->gdn.in_proj_z, &l->gdn.ab, &l->gdn.in_proj_a,
                                  &l->gdn.in_proj_b, &l->gdn.out_proj, &l->mlp.gate_up, &l->mlp.gate_proj,
                                  &l->mlp.up_proj, &l->mlp.down_proj}) {
      grow(*lin);
    }
  }
  if (num_attention_layers_ > 0 || has_mtp()) {
    ws = std::max(ws, kc::PagedAttentionWorkspaceBytes(static_cast<int>(T), static_cast<int>(H), static_cast<int>(hd)));
  }
  ASSIGN_OR_RETURN(workspace_, Buffer<uint8_t>(ws, &total));
  size_t gate_ws = 16;
  for (const CudaLayerWeights& l : weights_.layers) {
    for (const CudaLinear* lin : {&l.gdn.ab, &l.gdn.in_proj_a, &l.gdn.in_proj_b}) {
      gate_ws = std::max(gate_ws, lin->workspace_bytes(static_cast<int>(T)));
    }
  }
  ASSIGN_OR_RETURN(gate_workspace_, Buffer<uint8_t>(gate_ws, &total));
  if (!gdn_.empty()) {  // 0 where the chunked GDN path cannot run: prefill then takes the sequential kernel
    const kc::GdnShape gs{static_cast<int>(nk), static_cast<int>(nv), static_cast<int>(dk), static_cast<int>(dv)};
    const size_t gdn_ws = kc::GdnWorkspaceBytes(gs, static_cast<int>(T), static_cast<int>(S));
    if (gdn_ws > 0) {
      ASSIGN_OR_RETURN(gdn_workspace_, Buffer<uint8_t>(gdn_ws, &total));
    }
  }
  // The KV cache: the pages asked for, or (0) what the memory budget leaves.
  const int64_t page_elems = static_cast<int64_t>(options_.kv_page_size) * KV * hd;
  const int64_t kv_bytes = static_cast<int64_t>(kc::KvDtypeBytes(options_.kv_dtype));
  if (options_.num_kv_pages == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    KvMemoryRequest r;
    r.utilization = options_.gpu_memory_utilization;
    r.device_total = static_cast<int64_t>(total_bytes);
    r.device_free = static_cast<int64_t>(free_bytes);
    // K and V of every attention layer, and of the MTP layer
    r.page_bytes = static_cast<int64_t>(num_attention_layers_ + (has_mtp() ? 1 : 0)) * 2 * page_elems * kv_bytes;
    r.page_size = options_.kv_page_size;
    r.max_seq_len = options_.max_seq_len;
    r.max_batch = options_.num_slots;
    ASSIGN_OR_RETURN(options_.num_kv_pages, PlanKvPages(r));
  }
  if (options_.kv_dtype == kc::KvDtype::kFp8E4M3 && kv_scales.empty()) {
    spdlog::warn("cuda runner: fp8 KV cache without k_scale / v_scale in the checkpoint: scale 1.0 (|K|, |V| "
                 "beyond 448 saturate); `sparkserve quantize` with calibration stores per-layer scales");
  }
  std::vector<std::string> attention_modules;  // the layers' in order, then the MTP layer's
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (kv_index_[static_cast<size_t>(layer)] >= 0) {
      attention_modules.push_back(fmt::format("{}layers.{}.self_attn", c.weight_prefix(), layer));
    }
  }
  if (has_mtp()) attention_modules.push_back("mtp.layers.0.self_attn");
  for (const std::string& attention : attention_modules) {
    const size_t n = static_cast<size_t>(options_.num_kv_pages) * static_cast<size_t>(page_elems * kv_bytes);
    KvState kv;
    ASSIGN_OR_RETURN(kv.k, DeviceBuffer<uint8_t>::Zeros(n));
    ASSIGN_OR_RETURN(kv.v, DeviceBuffer<uint8_t>::Zeros(n));
    if (auto it = kv_scales.find(attention); it != kv_scales.end()) {
      kv.k_scale = it->second.first;
      kv.v_scale = it->second.second;
    }
    total += static_cast<int64_t>(2 * n);
    kv_.push_back(std::move(kv));
  }
  // Uploads and zero fills ran on the legacy default stream, which stream_ (non-blocking) does not
  // wait for: finish them before any step runs.
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  device_bytes_ = total + weights_.decode_weight_bytes() + weights_.mtp.weight_bytes() +
                  static_cast<int64_t>(weights_.embed_tokens.bytes());
  spdlog::info("cuda runner{}: {} layers ({} attention, {} GDN){}, {:.2f} GB of weights read per decode step, "
               "{} {} KV pages of {} tokens ({} full sequences of {}), {} GDN state, {:.2f} GB of device memory",
               tp() ? fmt::format(" (rank {} of {}, {})", plan_.rank, plan_.world, collective_->transport()) : "",
               c.num_hidden_layers, num_attention_layers_, gdn_.size(),
               has_mtp() ? fmt::format(" + MTP ({:.3f} GB a draft step before lm_head)",
                                       static_cast<double>(weights_.mtp.weight_bytes()) / 1e9)
                         : "",
               static_cast<double>(weights_.decode_weight_bytes()) / 1e9,
               options_.num_kv_pages, options_.kv_dtype == kc::KvDtype::kFp8E4M3 ? "fp8" : "bf16",
               options_.kv_page_size,
               options_.num_kv_pages / std::max(1, pages_stride_), options_.max_seq_len,
               options_.state_dtype == kc::GdnStateDtype::kBf16 ? "bf16" : "fp32",
               static_cast<double>(device_bytes_) / 1e9);
  return absl::OkStatus();
}

ModelCapacity CudaModelRunner::capacity() const {
  return {options_.num_slots, options_.num_kv_pages, options_.kv_page_size, static_cast<int32_t>(config_.vocab_size),
          options_.max_seq_len, columns_.max_columns()};
}

StepLimits CudaModelRunner::limits() const {
  StepLimits l;
  l.num_slots = options_.num_slots;
  l.max_seq_len = options_.max_seq_len;
  l.kv_page_size = options_.kv_page_size;
  l.num_kv_pages = options_.num_kv_pages;
  l.needs_kv = !kv_.empty();
  l.max_verify_tokens = columns_.max_columns();
  l.vocab_size = config_.vocab_size;
  l.max_step_tokens = options_.max_step_tokens;
  l.has_mtp = has_mtp();
  l.prev_step_rows = prev_rows_;
  return l;
}

kc::RaggedBatchDevice CudaModelRunner::BatchOf(const DeviceBuffer<int32_t>& meta, int num_seqs, int num_tokens,
                                               int max_seq_tokens) const {
  const int32_t* m = meta.data();
  kc::RaggedBatchDevice b;
  b.num_seqs = num_seqs;
  b.num_tokens = num_tokens;
  b.max_seq_tokens = max_seq_tokens;
  b.token_begin = m + meta_.token_begin;
  b.start_pos = m + meta_.start_pos;
  b.token_seq = m + meta_.token_seq;
  b.positions = m + meta_.positions;
  b.slots = m + meta_.slots;
  b.keep_columns = reinterpret_cast<const uint8_t*>(m + meta_.keep_columns);
  b.page_table = m + meta_.page_table;
  b.pages_stride = pages_stride_;
  return b;
}

kc::KvPoolDevice CudaModelRunner::KvPool(int32_t i) const {
  const KvState& s = kv_[static_cast<size_t>(i)];
  return {const_cast<uint8_t*>(s.k.data()), const_cast<uint8_t*>(s.v.data()), options_.num_kv_pages,
          options_.kv_page_size, static_cast<int>(shapes_.kv_heads), static_cast<int>(config_.head_dim),
          options_.kv_dtype, s.k_scale, s.v_scale};
}

absl::StatusOr<StepOutput> CudaModelRunner::Run(const StepPlan& plan) {
  RETURN_IF_ERROR(ValidateStepPlan(limits(), plan));
  RETURN_IF_ERROR(columns_.Check(plan.commits));
  for (const SlotCopy& c : plan.copies) {
    RETURN_IF_ERROR(EnqueueSlotCopy(c.src, c.dst));
    columns_.Clear(c.dst);
  }
  for (const PageCopy& c : plan.page_copies) RETURN_IF_ERROR(EnqueuePageCopy(c.src, c.dst));
  RETURN_IF_ERROR(columns_.Commit(plan.commits, stream_));
  StepOutput drafted;
  RETURN_IF_ERROR(RunDrafts(plan.drafts, &drafted));
  if (plan.seqs.empty()) {  // no forward: the last forward's rows stay for later drafts
    RETURN_IF_ERROR(Sync());
    drafted.logit_row_begin = {0};
    return drafted;
  }
  auto with_drafts = [&](StepOutput out) {
    out.drafts = std::move(drafted.drafts);
    out.draft_logits = std::move(drafted.draft_logits);
    return out;
  };
  if (plan.sampling.empty()) {
    ASSIGN_OR_RETURN(StepOutput out, Execute(plan, true, drafted.drafts));
    return with_drafts(std::move(out));
  }
  for (const SeqWork& w : plan.seqs) {
    if (w.logits == LogitsWanted::kAll) {
      return absl::InvalidArgumentError("sampling on the GPU takes kLast/kNone logits only (one sampled row per sequence)");
    }
  }
  ASSIGN_OR_RETURN(StepOutput out, Execute(plan, false, drafted.drafts));
  RETURN_IF_ERROR(SampleOnDevice(plan.sampling, plan.masks, &out));
  return with_drafts(std::move(out));
}

absl::StatusOr<StepOutput> CudaModelRunner::Execute(const StepPlan& plan, bool fetch,
                                                    const std::vector<std::vector<int32_t>>& drafts) {
  step_keeps_columns_ = false;
  const int S = static_cast<int>(plan.seqs.size());
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  // Metadata into the pinned block (the previous step's upload finished: Forward ends synchronised).
  int32_t* m = meta_host_;
  auto* keep = reinterpret_cast<uint8_t*>(m + meta_.keep_columns);
  int T = 0, max_seq_tokens = 1, R = 0;
  bool decode_only = true;
  m[meta_.token_begin] = 0;
  for (int s = 0; s < S; ++s) {
    const SeqWork& w = plan.seqs[static_cast<size_t>(s)];
    std::copy(w.tokens.begin(), w.tokens.end(), m + meta_.tokens + T);
    if (w.num_drafts > 0) {  // this step's drafts of its slot (validated: one DraftWork, as many)
      for (size_t i = 0; i < plan.drafts.size(); ++i) {
        if (plan.drafts[i].slot != w.slot) continue;
        std::copy(drafts[i].begin(), drafts[i].end(), m + meta_.tokens + T + w.tokens.size());
      }
    }
    const int n = w.num_tokens();
    for (int i = 0; i < n; ++i) {
      m[meta_.token_seq + T + i] = s;
      m[meta_.positions + T + i] = w.start_pos + i;
    }
    if (w.logits == LogitsWanted::kAll) {
      for (int i = 0; i < n; ++i) m[meta_.logit_rows + R++] = T + i;
    } else if (w.logits == LogitsWanted::kLast) {
      m[meta_.logit_rows + R++] = T + n - 1;
    }
    decode_only = decode_only && n == 1 && w.logits == LogitsWanted::kLast;
    m[meta_.start_pos + s] = w.start_pos;
    m[meta_.slots + s] = w.slot;
    const bool keeps = w.keep_column_states && columns_.max_columns() > 1;
    keep[s] = keeps ? 1 : 0;
    step_keeps_columns_ = step_keeps_columns_ || keeps;
    const size_t pages = std::min(w.kv_pages.size(), static_cast<size_t>(pages_stride_));
    std::copy_n(w.kv_pages.begin(), pages, m + meta_.page_table + static_cast<size_t>(s) * pages_stride_);
    T += n;
    m[meta_.token_begin + s + 1] = T;
    m[meta_.last_rows + s] = T - 1;
    max_seq_tokens = std::max(max_seq_tokens, n);
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_device_.data(), meta_host_, meta_.total * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
  StepOutput out;
  if (fetch) {
    out.logits = core::Tensor::Empty({R, V}, core::DType::kF32);
    out.hidden = core::Tensor::Empty({R, d}, core::DType::kF32);
    out.last_hidden = core::Tensor::Empty({S, d}, core::DType::kF32);
  } else if (R > logit_chunk_rows_) {
    return absl::InvalidArgumentError(
        fmt::format("a sampled step has {} logit rows; the runner samples at most {}", R, logit_chunk_rows_));
  }
  out.logit_row_begin.push_back(0);
  for (const SeqWork& w : plan.seqs) {
    const int rows = w.logits == LogitsWanted::kAll ? w.num_tokens() : w.logits == LogitsWanted::kLast;
    out.logit_row_begin.push_back(out.logit_row_begin.back() + rows);
  }
  // Rows [row_begin, row_begin + rows) of the step's logits and hidden to the host; with tensor
  // parallelism the whole rows first, then a bounded wait (a pageable copy would wait unbounded).
  auto fetch_rows = [&](int row_begin, int rows) -> absl::Status {
    if (!fetch) return absl::OkStatus();
    RETURN_IF_ERROR(FetchLogitRows(rows, out.logits.data<float>() + row_begin * V));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.hidden.data<float>() + row_begin * d, hidden_.data(),
                                         sizeof(float) * rows * d, cudaMemcpyDeviceToHost, stream_));
    return absl::OkStatus();
  };
  profiling_ = std::exchange(profile_next_, false);
  if (decode_only && options_.cuda_graphs && S <= logit_chunk_rows_) {
    if (profiling_) {  // a graph of its own, with the event marks, replayed once
      ASSIGN_OR_RETURN(DecodeGraph graph, CaptureDecodeStep(S));
      absl::Status launched = LaunchDecodeGraph(graph);
      if (launched.ok()) launched = Sync();
      DestroyDecodeGraph(graph);
      RETURN_IF_ERROR(launched);
    } else {
      auto it = decode_graphs_.find(S);
      // A rebuilt group (a node lost and re-synced): graphs holding the old communicator go.
      if (tp() && it != decode_graphs_.end() && it->second.epoch != collective_->group_epoch()) {
        for (auto& [size, graph] : decode_graphs_) DestroyDecodeGraph(graph);
        decode_graphs_.clear();
        it = decode_graphs_.end();
      }
      if (it == decode_graphs_.end()) {
        ASSIGN_OR_RETURN(DecodeGraph graph, CaptureDecodeStep(S));
        spdlog::debug("cuda runner: captured the decode step for batch {} ({} segment(s))", S, graph.segments.size());
        it = decode_graphs_.emplace(S, std::move(graph)).first;
      }
      RETURN_IF_ERROR(LaunchDecodeGraph(it->second));
    }
    RETURN_IF_ERROR(fetch_rows(0, S));
  } else {
    RETURN_IF_ERROR(Mark("start"));
    RETURN_IF_ERROR(EnqueueLayers(S, T, max_seq_tokens));
    for (int r = 0; r < R; r += logit_chunk_rows_) {
      const int rows = std::min(logit_chunk_rows_, R - r);
      RETURN_IF_ERROR(EnqueueHead(normed_.data(), meta_device_.data() + meta_.logit_rows + r, rows));
      RETURN_IF_ERROR(fetch_rows(r, rows));
    }
  }
  if (profiling_) RETURN_IF_ERROR(CollectOpProfile());
  columns_.AfterForward(plan);
  prev_rows_ = T;  // normed_ holds them until the next forward
  if (fetch) {
    if (tp()) RETURN_IF_ERROR(Sync());
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.last_hidden.data<float>(), last_hidden_.data(), sizeof(float) * S * d,
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  return out;
}

absl::Status CudaModelRunner::FetchLogitRows(int rows, float* host) {
  const int64_t V = config_.vocab_size;
  const float* logits = logits_.data();
  if (tp()) {
    RETURN_IF_ERROR(GatherLogits(rows));
    RETURN_IF_ERROR(Sync());
    logits = full_logits_.data();
  }
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host, logits, sizeof(float) * rows * V, cudaMemcpyDeviceToHost, stream_));
  return absl::OkStatus();
}

DecodeTraffic CudaModelRunner::DecodeTrafficAt(const std::vector<int64_t>& contexts) const {
  const auto& c = config_;
  const RankShapes& rs = shapes_;  // this rank's share (weights_ holds this rank's)
  const int64_t S = static_cast<int64_t>(contexts.size());
  DecodeTraffic t;
  t.weight_bytes = weights_.decode_weight_bytes() + S * c.hidden_size * 2;  // + the embedding rows read
  const int64_t kv_per_token =  // K and V
      2 * rs.kv_heads * c.head_dim * static_cast<int64_t>(kc::KvDtypeBytes(options_.kv_dtype));
  for (const int64_t ctx : contexts) t.kv_bytes += int64_t{num_attention_layers_} * (ctx + 1) * kv_per_token;
  const int64_t per_layer =
      rs.nv * rs.dk * rs.dv * static_cast<int64_t>(kc::GdnStateDtypeBytes(options_.state_dtype)) +
      rs.conv_channels() * (c.linear_conv_kernel_dim - 1) * 4;
  t.state_bytes = 2 * S * static_cast<int64_t>(gdn_.size()) * per_layer;
  return t;
}

}  // namespace sparkserve::model::cuda
