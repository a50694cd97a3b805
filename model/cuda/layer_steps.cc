// CudaModelRunner's per-step kernel sequence: each layer's ops enqueued in order (norms, linears,
// GDN / attention, gating, residuals), then the head's final norm and lm_head rows. The attention
// and MLP blocks serve the MTP layer too (mtp_drafts.cc).
#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/norm_ops.h"
#include "model/cuda/cuda_model_runner.h"
#include "quant/activation_quant.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

absl::Status CudaModelRunner::LinearThenAddNorm(const CudaLinear& linear, const __half* x, int T, const float* norm) {
  const float eps = static_cast<float>(config_.rms_norm_eps);
  if (!tp() && linear.has_epilogues() && fused_add_norm_) {
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::AddRmsNorm(act16_.data(), residual_.data(), norm, eps);
    return RunLinear(linear, x, T, nullptr, e);
  }
  // With tensor parallelism the output is this rank's partial sum: the whole sum first.
  RETURN_IF_ERROR(RunLinear(linear, x, T, delta_.data()));
  RETURN_IF_ERROR(AllReduce(delta_.data(), static_cast<size_t>(T) * static_cast<size_t>(config_.hidden_size)));
  RETURN_IF_ERROR(kc::AddRmsNormZeroCentered(residual_.data(), delta_.data(), norm, T,
                                             static_cast<int>(config_.hidden_size), eps, nullptr, act16_.data(), stream_));
  return Mark("add_norm");
}

absl::Status CudaModelRunner::RunLinear(const CudaLinear& linear, const __half* x, int rows, float* y,
                                        const kc::DecodeEpilogue& epilogue) {
  RETURN_IF_ERROR(linear.Run(x, rows, y, workspace_.data(), stream_, epilogue));
  if (!profiling_) return absl::OkStatus();
  const std::string& n = linear.name();
  return Mark(n.substr(n.find_last_of('.') + 1));  // "model.layers.3.mlp.down_proj" -> "down_proj"
}

absl::Status CudaModelRunner::EnqueueAttention(const CudaAttentionWeights& a, const kc::KvPoolDevice& kv,
                                               const kc::RaggedBatchDevice& batch, int T, const float* post_norm) {
  const auto& c = config_;
  const int H = static_cast<int>(shapes_.heads), KV = static_cast<int>(shapes_.kv_heads), hd = static_cast<int>(c.head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  __half* act16 = act16_.data();
  __half* mid16 = mid16_.data();
  kc::QkvInput in;  // q_proj rows per head: [q (hd) | gate (hd)]
  if (a.qkv.out() > 0) {  // proj0 [T, H * 2hd + 2 * KV * hd]
    const int row = a.qkv.out();
    RETURN_IF_ERROR(RunLinear(a.qkv, act16, T, proj0_.data()));
    in = {proj0_.data(), row, 2 * hd, proj0_.data() + H * 2 * hd, row, proj0_.data() + H * 2 * hd + KV * hd, row};
  } else {  // proj0 [T, H * 2hd], proj1 / proj2 [T, KV * hd]
    RETURN_IF_ERROR(RunLinear(a.q_proj, act16, T, proj0_.data()));
    RETURN_IF_ERROR(RunLinear(a.k_proj, act16, T, proj1_.data()));
    RETURN_IF_ERROR(RunLinear(a.v_proj, act16, T, proj2_.data()));
    in = {proj0_.data(), H * 2 * hd, 2 * hd, proj1_.data(), KV * hd, proj2_.data(), KV * hd};
  }
  RETURN_IF_ERROR(kc::QkNormRopeKvWrite(in, a.q_norm.data(), a.k_norm.data(), eps, H, static_cast<int>(c.rotary_dim()),
                                        static_cast<float>(c.rope.theta), batch, kv, mixed_.data(), stream_));
  RETURN_IF_ERROR(Mark("qk_norm_rope_kv_write"));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  RETURN_IF_ERROR(kc::PagedAttention(mixed_.data(), H, scale, kv, batch, in.q + hd, in.q_row_stride, 2 * hd, mid16,
                                     workspace_.data(), stream_));
  RETURN_IF_ERROR(Mark("paged_attention"));
  return LinearThenAddNorm(a.o_proj, mid16, T, post_norm);
}

absl::Status CudaModelRunner::EnqueueMlp(const CudaMlpWeights& mlp, int T, const float* next_norm) {
  const int F = static_cast<int>(shapes_.ffn), d = static_cast<int>(config_.hidden_size);
  __half* act16 = act16_.data();
  __half* mid16 = mid16_.data();
  if (mlp.gate_up.out() > 0 && mlp.gate_up.has_epilogues()) {  // silu(gate) * up straight into mid16
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::SwiGlu(mid16);
    RETURN_IF_ERROR(RunLinear(mlp.gate_up, act16, T, nullptr, e));
  } else if (mlp.gate_up.out() > 0) {  // proj0 [T, 2F]
    RETURN_IF_ERROR(RunLinear(mlp.gate_up, act16, T, proj0_.data()));
    RETURN_IF_ERROR(kc::SwiGlu(proj0_.data(), proj0_.data() + F, T, F, 2 * F, mid16, stream_));
    RETURN_IF_ERROR(Mark("swiglu"));
  } else {  // proj0 / proj1 [T, F]
    RETURN_IF_ERROR(RunLinear(mlp.gate_proj, act16, T, proj0_.data()));
    RETURN_IF_ERROR(RunLinear(mlp.up_proj, act16, T, proj1_.data()));
    RETURN_IF_ERROR(kc::SwiGlu(proj0_.data(), proj1_.data(), T, F, F, mid16, stream_));
    RETURN_IF_ERROR(Mark("swiglu"));
  }
  if (next_norm != nullptr) return LinearThenAddNorm(mlp.down_proj, mid16, T, next_norm);
  RETURN_IF_ERROR(RunLinear(mlp.down_proj, mid16, T, delta_.data()));
  return AllReduce(delta_.data(), static_cast<size_t>(T) * static_cast<size_t>(d));
}

absl::Status CudaModelRunner::EnqueueLayers(int S, int T, int max_seq_tokens) {
  const auto& c = config_;
  const RankShapes& rs = shapes_;  // this rank's heads and widths
  const int d = static_cast<int>(c.hidden_size);
  const kc::GdnShape gs{static_cast<int>(rs.nk), static_cast<int>(rs.nv), static_cast<int>(rs.dk),
                        static_cast<int>(rs.dv)};
  const int C = 2 * gs.nk * gs.dk + gs.nv * gs.dv, K = static_cast<int>(c.linear_conv_kernel_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const kc::RaggedBatchDevice batch = BatchOf(meta_device_, S, T, max_seq_tokens);
  float* residual = residual_.data();
  float* delta = delta_.data();
  __half* act16 = act16_.data();
  __half* mid16 = mid16_.data();
  RETURN_IF_ERROR(kc::EmbeddingGather(weights_.embed_tokens.data(), c.vocab_size, d, meta_device_.data() + meta_.tokens,
                                      T, residual, stream_));
  RETURN_IF_ERROR(Mark("embedding"));
  // The first input norm; every later norm follows the linear that feeds the residual stream.
  RETURN_IF_ERROR(
      kc::RmsNormZeroCentered(residual, weights_.layers.front().input_layernorm.data(), T, d, eps, nullptr, act16, stream_));
  RETURN_IF_ERROR(Mark("input_norm"));
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const CudaLayerWeights& w = weights_.layers[i];
    if (w.type == LayerType::kFullAttention) {
      RETURN_IF_ERROR(EnqueueAttention(w.attn, KvPool(kv_index_[i]), batch, T, w.post_attention_layernorm.data()));
    } else {
      const CudaGdnWeights& g = w.gdn;
      GdnState& st = gdn_[static_cast<size_t>(gdn_index_[i])];
      const float* qkv;  // [T, C] at row stride qkv_stride
      kc::GdnInput in;
      int qkv_stride;
      // The gate projections on gate_stream_ (when not profiling, so that every op's time stays its
      // own), overlapping the qkvz GEMM and the conv; joined before the recurrence.
      const bool gates_aside = !profiling_;
      if (gates_aside) {
        CUDA_RETURN_IF_ERROR(cudaEventRecord(gate_fork_, stream_));
        CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(gate_stream_, gate_fork_, 0));
      }
      const cudaStream_t gate_stream = gates_aside ? gate_stream_ : stream_;
      void* gate_workspace = gates_aside ? gate_workspace_.data() : workspace_.data();
      if (g.ab.out() > 0) {  // proj2 [T, 2 * nv]
        RETURN_IF_ERROR(g.ab.Run(act16, T, proj2_.data(), gate_workspace, gate_stream));
        in.a = proj2_.data();
        in.b = proj2_.data() + gs.nv;
        in.ab_stride = 2 * gs.nv;
      } else {  // proj2 / proj3 [T, nv]
        RETURN_IF_ERROR(g.in_proj_a.Run(act16, T, proj2_.data(), gate_workspace, gate_stream));
        RETURN_IF_ERROR(g.in_proj_b.Run(act16, T, proj3_.data(), gate_workspace, gate_stream));
        in.a = proj2_.data();
        in.b = proj3_.data();
        in.ab_stride = gs.nv;
      }
      if (gates_aside) {
        CUDA_RETURN_IF_ERROR(cudaEventRecord(gate_join_, gate_stream_));
      } else {
        RETURN_IF_ERROR(Mark("in_proj_ab"));
      }
      if (g.qkvz.out() > 0) {  // proj0 [T, C + nv * dv]
        RETURN_IF_ERROR(RunLinear(g.qkvz, act16, T, proj0_.data()));
        qkv = proj0_.data();
        qkv_stride = g.qkvz.out();
        in.z = proj0_.data() + C;
        in.z_stride = qkv_stride;
      } else {  // proj0 [T, C], proj1 [T, nv * dv]
        RETURN_IF_ERROR(RunLinear(g.in_proj_qkv, act16, T, proj0_.data()));
        RETURN_IF_ERROR(RunLinear(g.in_proj_z, act16, T, proj1_.data()));
        qkv = proj0_.data();
        qkv_stride = C;
        in.z = proj1_.data();
        in.z_stride = gs.nv * gs.dv;
      }
      const int gi = gdn_index_[i];  // verify windows keep the state after every column
      RETURN_IF_ERROR(kc::CausalConv1dSilu(qkv, qkv_stride, C, g.conv1d.data(), K, batch, st.conv.data(),
                                           step_keeps_columns_ ? columns_.column_window(gi) : nullptr,
                                           columns_.max_columns(), mixed_.data(), stream_));
      RETURN_IF_ERROR(Mark("gdn_conv"));
      in.mixed = mixed_.data();
      in.mixed_stride = C;
      if (gates_aside) CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, gate_join_, 0));
      RETURN_IF_ERROR(kc::GatedDeltaNet(in, gs, g.a_log.data(), g.dt_bias.data(), g.norm.data(), eps, batch,
                                        kc::GdnStateRef(st.recurrent.data(), options_.state_dtype),
                                        step_keeps_columns_ ? columns_.column_state(gi) : nullptr,
                                        columns_.max_columns(),
                                        mid16, stream_,
                                        {gdn_workspace_.data(), gdn_workspace_.bytes()}));
      RETURN_IF_ERROR(Mark("gated_delta_net"));
      RETURN_IF_ERROR(LinearThenAddNorm(g.out_proj, mid16, T, w.post_attention_layernorm.data()));
    }
    // The residual add + the next layer's input norm; after the last layer, the final norm below.
    const float* next_norm = i + 1 < weights_.layers.size() ? weights_.layers[i + 1].input_layernorm.data() : nullptr;
    RETURN_IF_ERROR(EnqueueMlp(w.mlp, T, next_norm));
  }
  // The final norm over every row (residual keeps the pre-norm stream), then each seq's last row.
  RETURN_IF_ERROR(
      kc::AddRmsNormZeroCentered(residual, delta, weights_.final_norm.data(), T, d, eps, normed_.data(), nullptr, stream_));
  RETURN_IF_ERROR(Mark("final_norm"));
  RETURN_IF_ERROR(kc::GatherRows(normed_.data(), d, meta_device_.data() + meta_.last_rows, S, last_hidden_.data(), stream_));
  return Mark("gather_rows");
}

absl::Status CudaModelRunner::EnqueueHead(const float* normed, const int32_t* row_index, int rows,
                                          const CudaLinear* head) {
  const int d = static_cast<int>(config_.hidden_size);
  RETURN_IF_ERROR(kc::GatherRows(normed, d, row_index, rows, hidden_.data(), stream_));
  RETURN_IF_ERROR(kc::F32ToF16(hidden_.data(), static_cast<int64_t>(rows) * d, hidden16_.data(), stream_));
  RETURN_IF_ERROR(Mark("gather_rows"));
  return RunLinear(head != nullptr ? *head : weights_.lm_head, hidden16_.data(), rows, logits_.data());
}

}  // namespace sparkserve::model::cuda
