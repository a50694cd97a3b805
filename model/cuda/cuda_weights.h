// CudaModelWeights: one tensor-parallel rank's Qwen3.5 text model weights on its GPU, bound by
// checkpoint name from that rank's shard (model/shard_cuts.h): linears as CudaLinear (NVFP4/FP8 kept
// quantised), norms and GDN vectors as f32, the embedding table (replicated) as bf16. Shapes are
// the rank's (d hidden, h/kv heads, nk/nv GDN heads, f MLP width, V_r vocab rows of lm_head; the
// embedding keeps all V rows). The MTP block (mtp.*) when asked for: its fc replicated, its layer cut
// like a main full-attention layer.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "model/cuda/cuda_linear.h"
#include "quant/checkpoint.h"

namespace sparkserve::model::cuda {

// Linears that read the same input are fused along `out` when they share a weight form (the
// `fused` member, out() > 0); otherwise the separate members hold them.
struct CudaAttentionWeights {
  CudaLinear qkv;                  // [h * 2 * head_dim + 2 * kv * head_dim, d]: q_proj | k_proj | v_proj
  CudaLinear q_proj;               // [h * 2 * head_dim, d]: per head q rows then gate rows
  CudaLinear k_proj, v_proj;       // [kv * head_dim, d]
  CudaLinear o_proj;               // [d, h * head_dim]
  DeviceBuffer<float> q_norm, k_norm;  // [head_dim] zero-centred
};

struct CudaGdnWeights {
  CudaLinear qkvz;                 // [2 * nk * dk + 2 * nv * dv, d]: in_proj_qkv | in_proj_z
  CudaLinear in_proj_qkv;          // [2 * nk * dk + nv * dv, d]
  CudaLinear in_proj_z;            // [nv * dv, d]
  CudaLinear ab;                   // [2 * nv, d]: in_proj_a | in_proj_b
  CudaLinear in_proj_a, in_proj_b;  // [nv, d]
  CudaLinear out_proj;             // [d, nv * dv]
  DeviceBuffer<float> conv1d;      // [2 * nk * dk + nv * dv, kernel]
  DeviceBuffer<float> a_log, dt_bias;  // [nv]
  DeviceBuffer<float> norm;        // [dv] plain weight
};

struct CudaMlpWeights {
  CudaLinear gate_up;              // [2 * f, d]: gate_proj | up_proj
  CudaLinear gate_proj, up_proj;   // [f, d]
  CudaLinear down_proj;            // [d, f]
};

struct CudaLayerWeights {
  LayerType type = LayerType::kLinearAttention;
  DeviceBuffer<float> input_layernorm, post_attention_layernorm;  // [d] zero-centred
  CudaAttentionWeights attn;  // full_attention layers
  CudaGdnWeights gdn;         // linear_attention layers
  CudaMlpWeights mlp;
};

// The MTP block (FORMATS.md §2): fc over [norm(embed), norm(hidden)], one full-attention decoder
// layer with its own KV pages, its final norm; the lm_head is the model's.
struct CudaMtpWeights {
  bool present = false;
  CudaLinear fc;                             // [d, 2d] replicated; input [embedding | hidden]
  DeviceBuffer<float> pre_fc_norm_embedding;  // [d] zero-centred
  DeviceBuffer<float> pre_fc_norm_hidden;     // [d] zero-centred
  DeviceBuffer<float> norm;                   // [d] zero-centred
  CudaLayerWeights layer;                     // mtp.layers.0.* (full attention, this rank's heads)
  int64_t weight_bytes() const;               // what one MTP step reads (lm_head excluded)
};

struct CudaModelWeights {
  DeviceBuffer<__nv_bfloat16> embed_tokens;  // [V, d]
  DeviceBuffer<float> final_norm;            // [d] zero-centred
  CudaLinear lm_head;                        // [V_r, d] (a view of embed_tokens' rows when tied)
  std::vector<CudaLayerWeights> layers;
  CudaMtpWeights mtp;                        // present: load_mtp and the shard has mtp.fc

  // Binds and uploads every parameter `config` names from rank plan.rank's shard (with `load_mtp`,
  // the MTP block too where the config and shard have one). Errors name the parameter (missing, or
  // a shape other than the config and plan imply).
  static absl::StatusOr<CudaModelWeights> Load(const Qwen35Config& config, const ShardPlan& plan,
                                               const quant::Checkpoint& shard,
                                               const CudaLinearOptions& linear_options = {}, bool load_mtp = false);
  // Bytes a decode step reads from the weights: every linear (lm_head included) once, norms and
  // GDN vectors, plus the embedding rows of the step (excluded here: `rows * d * 2` per step). The
  // MTP block is not part of a decode step.
  int64_t decode_weight_bytes() const;
};

}  // namespace sparkserve::model::cuda
