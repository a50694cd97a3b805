// CudaModelRunner: the CUDA ModelRunner for Qwen3.5, one tensor-parallel rank on one GPU. Forward
// runs a ragged StepPlan as one stream of kernels (embedding -> per layer: norm, projections,
// attention or GDN, MLP -> final norm -> lm_head); a decode step (every seq one token, last-token
// logits) replays a CUDA graph captured once per batch size. State lives on the GPU: GDN recurrent
// state and conv windows per slot, bf16 KV pages per attention layer, for this rank's heads.
// Tensor parallelism (plan.world > 1, DESIGN.md §5), through a core::Collective's device path: the
// o_proj / GDN out_proj / down_proj outputs are partial sums, all-reduced before the residual add
// and the next norm (two all-reduces a layer); lm_head gives this rank's vocab rows, gathered into
// whole rows in vocab order where logits are returned, and sampling over the split vocabulary
// follows model/split_vocab_sampling.h. A collective that can be captured (NCCL) is replayed inside
// the decode graphs; a host-staged one is called between graph segments. World 1: no collective.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/ragged_batch.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "quant/checkpoint.h"
#include "model/cuda/cuda_weights.h"
#include "model/cuda/device_sampler.h"
#include "model/cuda/verify_columns.h"
#include "model/model_runner.h"
#include "model/step_validation.h"

namespace sparkserve::model::cuda {

struct CudaRunnerOptions {
  int32_t device = 0;
  int32_t num_slots = 8;            // most sequences in flight (GDN state slots)
  int32_t num_kv_pages = 64;        // KV pages per attention layer; 0: as many as the memory budget leaves
  double gpu_memory_utilization = 0.9;  // the budget, a fraction of the device's memory (num_kv_pages == 0)
  int32_t kv_page_size = 16;        // tokens per page
  int32_t max_seq_len = 4096;
  int32_t max_step_tokens = 2048;   // most tokens in one step (activation buffers are sized by it)
  bool cuda_graphs = true;          // replay decode steps from captured graphs
  // KV cache element type: bf16, or float8_e4m3fn with per-layer k/v scales from the checkpoint
  // (`self_attn.k_scale` / `v_scale`, written by `quantize` with calibration; 1.0 where absent).
  kernels::cuda::KvDtype kv_dtype = kernels::cuda::KvDtype::kBf16;
  // GDN recurrent state between steps: f32, or bf16 (half the memory and decode traffic; kernels/cuda/gdn.h).
  kernels::cuda::GdnStateDtype state_dtype = kernels::cuda::GdnStateDtype::kF32;
  // Blackwell (sm_120/121) W4A4 prefill for NVFP4 linears with calibrated input scales (CudaLinearOptions;
  // UNTESTED ON HARDWARE, off by default). The extra weight copy counts against the memory budget.
  bool w4a4_prefill = false;
  // Speculative decoding: most columns of a verify window (keep_column_states; f32 GDN state only).
  int32_t max_verify_tokens = 1;
  // Load the checkpoint's MTP block (where it has one) and run the plans' DraftWork (mtp_drafts.cc):
  // its weights and one more attention layer's KV pages come out of the memory budget.
  bool mtp = false;
  // MTP drafts are the greedy token among ids [0, draft_vocab) (0: all): the draft steps' lm_head is
  // those rows only (a view of the tied embedding, else a bf16 copy). One rank only.
  int32_t draft_vocab = 0;
};

// What one decode step reads from memory, for bench engine's floor.
struct DecodeTraffic {
  int64_t weight_bytes = 0;  // every weight once (lm_head, norms and scales included)
  int64_t kv_bytes = 0;      // K and V of every attention layer at the given contexts
  int64_t state_bytes = 0;   // GDN recurrent state + conv window, read and written
};

class CudaModelRunner : public ModelRunner {
 public:
  // Reads the config and builds the runner from rank 0 of 1's shard (model/shard_cuts.h).
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Load(const std::string& model_dir,
                                                                const CudaRunnerOptions& options);
  // From one rank's shard in hand (model/shard_cuts.h CutShard), exchanging partial sums through
  // `collective` (its device path; null for one rank; its rank and world must be the plan's).
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Load(const quant::Checkpoint& shard,
                                                                const Qwen35Config& config, const ShardPlan& plan,
                                                                core::Collective* collective,
                                                                const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  ModelCapacity capacity() const override;
  // Copies, commits, MTP drafts, then the forward; with plan.sampling, sampling on the GPU (one kLast
  // row per seq at most).
  absl::StatusOr<StepOutput> Run(const StepPlan& plan) override;
  bool samples_on_device() const override { return true; }
  bool has_mtp() const override { return weights_.mtp.present; }

  const Qwen35Config& config() const { return config_; }
  // Bytes a decode step over seqs at `contexts` (tokens already cached per seq) reads on this rank.
  DecodeTraffic DecodeTrafficAt(const std::vector<int64_t>& contexts) const;
  // Per-op GPU time of the next Forward (events between the step's ops, replayed as a graph for
  // decode steps); TakeOpProfile returns {op, total microseconds, launches} summed over layers.
  void ProfileNextStep() { profile_next_ = true; }
  struct OpTime {
    std::string op;
    double micros = 0;
    int count = 0;
  };
  std::vector<OpTime> TakeOpProfile() { return std::move(op_profile_); }
  // Device memory this runner holds (weights, state, activations), bytes.
  int64_t device_bytes() const { return device_bytes_; }

 private:
  CudaRunnerOptions options_;
  Qwen35Config config_;
  ShardPlan plan_;
  RankShapes shapes_;                      // this rank's heads, GDN heads, MLP width, vocab rows
  core::Collective* collective_ = nullptr;  // world > 1 only
  CudaModelWeights weights_;
  cudaStream_t stream_ = nullptr;

  struct GdnState {
    DeviceBuffer<uint8_t> recurrent;  // [num_slots, nv_r, dk, dv] f32 or bf16 (options_.state_dtype)
    DeviceBuffer<float> conv;       // [num_slots, C_r, kernel - 1] (C_r = 2 nk_r dk + nv_r dv)
  };
  struct KvState {
    DeviceBuffer<uint8_t> k, v;  // [num_pages, page_size, kv_r, head_dim] bf16 or fp8 (options_.kv_dtype)
    float k_scale = 1.0f, v_scale = 1.0f;  // fp8: stored = e4m3(x / scale)
  };
  std::vector<int32_t> gdn_index_, kv_index_;  // per layer: index into gdn_/kv_ or -1
  int32_t num_attention_layers_ = 0;  // kv_[0, n): the layers'; kv_[n]: the MTP layer's (when loaded)
  std::vector<GdnState> gdn_;
  std::vector<KvState> kv_;
  VerifyColumns columns_;          // verify windows' per-column GDN state (verify_columns.h)
  bool step_keeps_columns_ = false;  // this forward has keep_column_states seqs

  // Step metadata: one int32 block on the host (pinned) and the device, copied in one transfer.
  // hidden_rows: an MTP pass's source row of each token's hidden.
  struct MetaLayout {
    size_t tokens, token_begin, start_pos, token_seq, positions, slots, keep_columns, page_table, logit_rows,
        last_rows, hidden_rows, total;  // offsets in int32 units
  };
  MetaLayout meta_;
  int32_t pages_stride_ = 0;
  int32_t* meta_host_ = nullptr;
  DeviceBuffer<int32_t> meta_device_;
  // The MTP passes' own block (same layout): filled while the step's forward metadata may still be
  // in flight.
  int32_t* mtp_meta_host_ = nullptr;
  DeviceBuffer<int32_t> mtp_meta_device_;
  int64_t prev_rows_ = 0;  // token rows of the last forward: normed_ keeps them for DraftWork

  // Activations, sized for max_step_tokens rows (head and GDN counts, f: this rank's).
  int32_t logit_chunk_rows_ = 0;   // lm_head rows per pass (the logits buffer's rows)
  DeviceBuffer<float> residual_, delta_, normed_;          // [T, d] (replicated on every rank)
  // MTP (when loaded): the fc input [T, 2d], the normed target hidden [T, d], mtp.norm's output [T, d].
  DeviceBuffer<__half> mtp_cat16_, mtp_hidden16_;
  DeviceBuffer<float> mtp_out_;
  CudaLinear draft_head_;  // [draft_vocab, d] (options_.draft_vocab); out() == 0: the whole lm_head
  DeviceBuffer<__half> act16_;                              // [T, d] linear inputs
  DeviceBuffer<__half> mid16_;                              // [T, max(h*hd, nv*dv, f)]
  DeviceBuffer<float> proj0_, proj1_, proj2_, proj3_, mixed_;  // projection outputs (see Forward)
  DeviceBuffer<float> hidden_, last_hidden_;                // [chunk, d], [num_slots, d]
  DeviceBuffer<__half> hidden16_;                           // [chunk, d]
  DeviceBuffer<float> logits_;                              // [chunk, V_r] (room for chunk * vocab_pad_)
  // Tensor parallelism: whole logit rows from every rank's vocab rows.
  int64_t vocab_pad_ = 0;              // ceil(V / world): each rank's share of a gather, per row
  DeviceBuffer<float> gathered_;       // [world, chunk * vocab_pad_] rank-major
  DeviceBuffer<float> full_logits_;    // [chunk, V] in vocab order
  DeviceBuffer<uint8_t> workspace_;
  // A GDN layer's gate projections (in_proj_a|b: a few blocks) run on gate_stream_ beside its
  // in_proj_qkvz GEMM and conv (which leave SMs idle at batched decode), with their own workspace;
  // gate_fork_ / gate_join_ order them after the layer's input and before the recurrence.
  cudaStream_t gate_stream_ = nullptr;
  cudaEvent_t gate_fork_ = nullptr, gate_join_ = nullptr;
  DeviceBuffer<uint8_t> gate_workspace_;
  DeviceBuffer<uint8_t> gdn_workspace_;  // the chunked GDN prefill's (kernels/cuda/gdn.h GdnWorkspace); empty: none
  size_t attention_workspace_bytes_ = 0;
  int64_t device_bytes_ = 0;

  // GPU sampling (made at the first sampled step; used outside graphs).
  std::unique_ptr<DeviceSampler> sampler_;
  // Structured outputs: mask words | logit rows | mask rows, staged in pinned memory then copied.
  uint32_t* mask_host_ = nullptr;
  size_t mask_host_capacity_ = 0;  // uint32 elements
  DeviceBuffer<uint32_t> mask_device_;

  // Op profiling (ProfileNextStep): events recorded after each op while enqueueing.
  bool profile_next_ = false, profiling_ = false;
  std::vector<std::pair<std::string, cudaEvent_t>> op_marks_;
  std::vector<OpTime> op_profile_;
  absl::Status Mark(const std::string& op);
  absl::Status CollectOpProfile();

  bool fused_add_norm_ = true;  // residual add + RMSNorm in the producing linear's epilogue

  // A captured decode step: one graph, or (a collective that cannot be captured) the segments
  // between the all-reduces, replayed with the collective called between them.
  struct DecodeGraph {
    std::vector<cudaGraphExec_t> segments;
    std::vector<std::pair<float*, size_t>> reduces;  // after segment i: all-reduce of (data, count)
    uint64_t epoch = 0;                              // the collective's group_epoch() at capture
  };
  std::map<int32_t, DecodeGraph> decode_graphs_;  // by batch size
  DecodeGraph* building_ = nullptr;               // the segmented capture in progress

  explicit CudaModelRunner(const CudaRunnerOptions& options) : options_(options) {}
  bool tp() const { return plan_.world > 1; }
  absl::Status Init(const quant::Checkpoint& shard);
  StepLimits limits() const;
  // The ragged batch described by a metadata block (meta_device_ or mtp_meta_device_).
  kernels::cuda::RaggedBatchDevice BatchOf(const DeviceBuffer<int32_t>& meta, int num_seqs, int num_tokens,
                                           int max_seq_tokens) const;
  kernels::cuda::KvPoolDevice KvPool(int32_t layer) const;
  // Everything between the metadata upload and the lm_head: the step's kernels on stream_.
  absl::Status EnqueueLayers(int num_seqs, int num_tokens, int max_seq_tokens);
  // A full-attention block on act16_ (this layer's normed input): projections, q/k norm + RoPE + KV
  // write into `kv`, paged attention, o_proj, then residual_ += output and act16_ = norm(residual_).
  absl::Status EnqueueAttention(const CudaAttentionWeights& a, const kernels::cuda::KvPoolDevice& kv,
                                const kernels::cuda::RaggedBatchDevice& batch, int T, const float* post_norm);
  // The MLP on act16_; its output joins residual_ and act16_ = RMSNorm(residual_, next_norm), or
  // (next_norm null) stays in delta_, all-reduced, for the caller's final norm.
  absl::Status EnqueueMlp(const CudaMlpWeights& mlp, int T, const float* next_norm);
  // Logit rows of `normed` [*, d] at row_index[0, rows) (device): gather, f16, lm_head (or `head`)
  // into logits_.
  absl::Status EnqueueHead(const float* normed, const int32_t* row_index, int rows, const CudaLinear* head = nullptr);
  // The MTP draft head (options_.draft_vocab rows of the lm_head), from the shard's lm_head or the
  // tied embedding.
  absl::Status InitDraftHead(const quant::Checkpoint& shard);
  // The plan's DraftWork (mtp_drafts.cc): the MTP block over each work's teacher-forced positions,
  // then its greedy drafts into out->drafts (sampled on the GPU), kAll logits into out->draft_logits.
  absl::Status RunDrafts(const std::vector<DraftWork>& drafts, StepOutput* out);
  // One MTP pass over mtp_meta_'s batch (uploaded): embedding and hidden rows (from `hidden_src`)
  // normed and concatenated, fc, the MTP layer, mtp.norm into mtp_out_.
  absl::Status EnqueueMtpPass(int num_seqs, int num_tokens, int max_seq_tokens, const float* hidden_src);
  // The decode step of S seqs (one token each) captured into executable graph(s).
  absl::StatusOr<DecodeGraph> CaptureDecodeStep(int S);
  absl::Status LaunchDecodeGraph(const DecodeGraph& g);
  static void DestroyDecodeGraph(DecodeGraph& g);
  absl::Status BeginSegment();
  absl::Status EndSegment();  // ends the capture in progress (if any) into building_
  // data[0, count) summed over the ranks, on stream_ (tensor parallelism; a no-op at world 1). Inside
  // a segmented capture: a segment boundary, the all-reduce runs at replay.
  absl::Status AllReduce(float* data, size_t count);
  // Logit rows [0, rows) of logits_ (this rank's vocab rows) gathered into full_logits_ in vocab order.
  absl::Status GatherLogits(int rows);
  // Logit rows [0, rows) of the step's whole vocabulary (gathered first under tensor parallelism, with
  // a bounded wait) copied to `host` [rows, V] on stream_; the caller waits for the stream.
  absl::Status FetchLogitRows(int rows, float* host);
  // Waits for stream_ (through the collective at world > 1: bounded, a dead peer fails it).
  absl::Status Sync();
  absl::Status RunLinear(const CudaLinear& linear, const __half* x, int rows, float* y,
                         const kernels::cuda::DecodeEpilogue& epilogue = {});
  // `linear` (whose output joins the residual stream), then residual_ += output and act16_ =
  // RMSNorm(residual_) with weight `norm`: fused into the linear's epilogue when it has one.
  absl::Status LinearThenAddNorm(const CudaLinear& linear, const __half* x, int T, const float* norm);
  // The step up to the logits on the device; with `fetch`, logits/hidden/last_hidden come back.
  // `drafts`: per DraftWork its tokens, the last inputs of the verify seq of the same slot.
  absl::StatusOr<StepOutput> Execute(const StepPlan& plan, bool fetch, const std::vector<std::vector<int32_t>>& drafts);
  // Slot src's GDN recurrent state and conv window onto slot dst, ordered on stream_.
  absl::Status EnqueueSlotCopy(SlotId src, SlotId dst);
  // KV page src onto dst in every attention layer, on the step's stream (state_copies.cc).
  absl::Status EnqueuePageCopy(int32_t src, int32_t dst);
  absl::Status SampleOnDevice(const std::vector<RowSampling>& rows, const TokenMasks& masks, StepOutput* out);
  // The rows' token masks (RowSampling::mask_row) applied to logits_ (device_token_masks.cc; this
  // rank's vocab columns): waits for the engine's mask thread (masks.ready), stages the bits
  // through pinned memory.
  absl::Status ApplyTokenMasks(const std::vector<RowSampling>& rows, const TokenMasks& masks);
  // SampleOnDevice over the split vocabulary (world > 1), after the masks.
  absl::Status SampleSplit(const std::vector<RowSampling>& rows, StepOutput* out);
  absl::Status EnsureSampler();
  // Copies `rows` logit rows of `logits` [rows, V] to out->logits for the rows not sampled (kDone).
  absl::Status ReturnHostRows(const float* logits, StepOutput* out);
};

}  // namespace sparkserve::model::cuda
