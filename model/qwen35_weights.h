// Qwen35Weights: one tensor-parallel rank's shard of a Qwen3.5 text model + MTP block, dense f32 on
// the CPU, bound by checkpoint name through a WeightSource over that rank's shard (model/shard_cuts.h).
// Shapes below are per rank (h/kv attention heads, nk/nv GDN heads, f MLP width, V_r vocab rows).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "model/weight_source.h"

namespace sparkserve::model {

struct AttentionWeights {
  core::Tensor q_proj;  // [h * 2 * head_dim, d]: per head head_dim q rows, then head_dim gate rows
  core::Tensor k_proj;  // [kv * head_dim, d]
  core::Tensor v_proj;  // [kv * head_dim, d]
  core::Tensor o_proj;  // [d, h * head_dim] (this rank's input columns: output is a partial sum)
  core::Tensor q_norm;  // [head_dim] zero-centred
  core::Tensor k_norm;  // [head_dim] zero-centred
};

struct GdnWeights {
  core::Tensor in_proj_qkv;  // [2 * nk * dk + nv * dv, d]: rows [q | k | v] of this rank's heads
  core::Tensor in_proj_z;    // [nv * dv, d]
  core::Tensor in_proj_a;    // [nv, d]
  core::Tensor in_proj_b;    // [nv, d]
  core::Tensor conv1d;       // [2 * nk * dk + nv * dv, kernel] (checkpoint [C, 1, kernel])
  core::Tensor a_log;        // [nv]
  core::Tensor dt_bias;      // [nv]
  core::Tensor norm;         // [dv] plain weight (gated norm)
  core::Tensor out_proj;     // [d, nv * dv] (input columns: partial sum)
};

struct MlpWeights {
  core::Tensor gate_proj;  // [f, d]
  core::Tensor up_proj;    // [f, d]
  core::Tensor down_proj;  // [d, f] (input columns: partial sum)
};

struct LayerWeights {
  LayerType type = LayerType::kLinearAttention;
  core::Tensor input_layernorm;           // [d] zero-centred
  core::Tensor post_attention_layernorm;  // [d] zero-centred
  AttentionWeights attn;                  // full_attention layers
  GdnWeights gdn;                         // linear_attention layers
  MlpWeights mlp;
};

struct MtpWeights {
  bool present = false;
  core::Tensor fc;                     // [d, 2d] replicated; input cat(embedding, hidden)
  core::Tensor pre_fc_norm_embedding;  // [d] zero-centred
  core::Tensor pre_fc_norm_hidden;     // [d] zero-centred
  core::Tensor norm;                   // [d] zero-centred
  LayerWeights layer;                  // one full-attention decoder layer (mtp.layers.0.*)
};

struct Qwen35Weights {
  core::Tensor embed_tokens;  // [vocab, d] replicated
  core::Tensor final_norm;    // [d] zero-centred
  core::Tensor lm_head;       // [V_r, d]: rows vocab.first..vocab.second (a view of embed when tied)
  bool tied = false;          // lm_head shares embed_tokens' memory
  std::vector<LayerWeights> layers;
  MtpWeights mtp;             // present when the checkpoint has mtp.* and config asks for MTP

  // Binds every parameter of `config` from `source`, rank plan.rank's shard. Errors name the
  // parameter (missing, or a shape other than the config and plan imply).
  static absl::StatusOr<Qwen35Weights> Load(const Qwen35Config& config, const WeightSource& source,
                                            const ShardPlan& plan);
  // Bytes of weights held (the f32 shard).
  int64_t nbytes() const;
};

}  // namespace sparkserve::model
