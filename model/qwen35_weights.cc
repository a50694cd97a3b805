// Binding of Qwen3.5 checkpoint names to a rank's f32 weights (FORMATS.md §1-2); the source is that
// rank's shard (model/shard_cuts.h), so every parameter has its rank's shape (DESIGN.md §5).
#include "model/qwen35_weights.h"

#include <string>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::model {
namespace {

class Binder {
 public:
  Binder(const Qwen35Config& c, const WeightSource& src, const ShardPlan& plan)
      : c_(c), src_(src), rs_(RankShapes::Of(c, plan)) {}

  // Loads `name` and checks its shape (this rank's).
  absl::StatusOr<core::Tensor> Get(const std::string& name, const core::Shape& shape) {
    if (!src_.Has(name)) return absl::NotFoundError(fmt::format("checkpoint has no parameter {}", name));
    ASSIGN_OR_RETURN(core::Tensor t, src_.LoadF32(name));
    if (t.shape() != shape) {
      return absl::InvalidArgumentError(fmt::format("parameter {} has shape {}, the config (and shard) implies {}",
                                                    name, core::ShapeToString(t.shape()),
                                                    core::ShapeToString(shape)));
    }
    return t;
  }

  absl::StatusOr<AttentionWeights> Attention(const std::string& p) {
    const int64_t d = c_.hidden_size, hd = c_.head_dim, h = rs_.heads, kv = rs_.kv_heads;
    AttentionWeights w;
    ASSIGN_OR_RETURN(w.q_proj, Get(p + "q_proj.weight", {h * 2 * hd, d}));
    ASSIGN_OR_RETURN(w.k_proj, Get(p + "k_proj.weight", {kv * hd, d}));
    ASSIGN_OR_RETURN(w.v_proj, Get(p + "v_proj.weight", {kv * hd, d}));
    ASSIGN_OR_RETURN(w.o_proj, Get(p + "o_proj.weight", {d, h * hd}));
    ASSIGN_OR_RETURN(w.q_norm, Get(p + "q_norm.weight", {hd}));
    ASSIGN_OR_RETURN(w.k_norm, Get(p + "k_norm.weight", {hd}));
    return w;
  }

  absl::StatusOr<GdnWeights> Gdn(const std::string& p) {
    const int64_t d = c_.hidden_size, dv = rs_.dv, nv = rs_.nv, C = rs_.conv_channels();
    const int64_t K = c_.linear_conv_kernel_dim;
    GdnWeights w;
    ASSIGN_OR_RETURN(w.in_proj_qkv, Get(p + "in_proj_qkv.weight", {C, d}));
    ASSIGN_OR_RETURN(w.in_proj_z, Get(p + "in_proj_z.weight", {nv * dv, d}));
    ASSIGN_OR_RETURN(w.in_proj_a, Get(p + "in_proj_a.weight", {nv, d}));
    ASSIGN_OR_RETURN(w.in_proj_b, Get(p + "in_proj_b.weight", {nv, d}));
    ASSIGN_OR_RETURN(core::Tensor conv, Get(p + "conv1d.weight", {C, 1, K}));
    ASSIGN_OR_RETURN(w.conv1d, conv.Reshape({C, K}));
    ASSIGN_OR_RETURN(w.a_log, Get(p + "A_log", {nv}));
    ASSIGN_OR_RETURN(w.dt_bias, Get(p + "dt_bias", {nv}));
    ASSIGN_OR_RETURN(w.norm, Get(p + "norm.weight", {dv}));
    ASSIGN_OR_RETURN(w.out_proj, Get(p + "out_proj.weight", {d, nv * dv}));
    return w;
  }

  absl::StatusOr<MlpWeights> Mlp(const std::string& p) {
    const int64_t d = c_.hidden_size, f = rs_.ffn;
    MlpWeights w;
    ASSIGN_OR_RETURN(w.gate_proj, Get(p + "gate_proj.weight", {f, d}));
    ASSIGN_OR_RETURN(w.up_proj, Get(p + "up_proj.weight", {f, d}));
    ASSIGN_OR_RETURN(w.down_proj, Get(p + "down_proj.weight", {d, f}));
    return w;
  }

  absl::StatusOr<LayerWeights> Layer(const std::string& p, LayerType type) {
    LayerWeights w;
    w.type = type;
    const int64_t d = c_.hidden_size;
    ASSIGN_OR_RETURN(w.input_layernorm, Get(p + "input_layernorm.weight", {d}));
    ASSIGN_OR_RETURN(w.post_attention_layernorm, Get(p + "post_attention_layernorm.weight", {d}));
    if (type == LayerType::kFullAttention) {
      ASSIGN_OR_RETURN(w.attn, Attention(p + "self_attn."));
    } else {
      ASSIGN_OR_RETURN(w.gdn, Gdn(p + "linear_attn."));
    }
    ASSIGN_OR_RETURN(w.mlp, Mlp(p + "mlp."));
    return w;
  }

  const RankShapes& shapes() const { return rs_; }

 private:
  const Qwen35Config& c_;
  const WeightSource& src_;
  RankShapes rs_;
};

}  // namespace

absl::StatusOr<Qwen35Weights> Qwen35Weights::Load(const Qwen35Config& c, const WeightSource& src,
                                                  const ShardPlan& plan) {
  Binder b(c, src, plan);
  const std::string prefix(c.weight_prefix());
  const int64_t d = c.hidden_size, V = c.vocab_size;
  Qwen35Weights w;
  ASSIGN_OR_RETURN(w.embed_tokens, b.Get(prefix + "embed_tokens.weight", {V, d}));
  ASSIGN_OR_RETURN(w.final_norm, b.Get(prefix + "norm.weight", {d}));
  const Range vocab = b.shapes().vocab;
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed_tokens.Slice(vocab.first, vocab.second);
    w.tied = true;
  } else {
    ASSIGN_OR_RETURN(w.lm_head, b.Get("lm_head.weight", {vocab.second - vocab.first, d}));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights layer,
                     b.Layer(fmt::format("{}layers.{}.", prefix, i), c.layer_types[static_cast<size_t>(i)]));
    w.layers.push_back(std::move(layer));
  }
  if (c.mtp_num_hidden_layers > 0 && src.Has("mtp.fc.weight")) {
    MtpWeights& m = w.mtp;
    m.present = true;
    ASSIGN_OR_RETURN(m.fc, b.Get("mtp.fc.weight", {d, 2 * d}));
    ASSIGN_OR_RETURN(m.pre_fc_norm_embedding, b.Get("mtp.pre_fc_norm_embedding.weight", {d}));
    ASSIGN_OR_RETURN(m.pre_fc_norm_hidden, b.Get("mtp.pre_fc_norm_hidden.weight", {d}));
    ASSIGN_OR_RETURN(m.norm, b.Get("mtp.norm.weight", {d}));
    ASSIGN_OR_RETURN(m.layer, b.Layer("mtp.layers.0.", LayerType::kFullAttention));
  }
  return w;
}

int64_t Qwen35Weights::nbytes() const {
  int64_t n = 0;
  auto add = [&](const core::Tensor& t) { n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; };
  auto add_layer = [&](const LayerWeights& l) {
    for (const auto* t : {&l.input_layernorm, &l.post_attention_layernorm, &l.attn.q_proj, &l.attn.k_proj,
                          &l.attn.v_proj, &l.attn.o_proj, &l.attn.q_norm, &l.attn.k_norm,
                          &l.gdn.in_proj_qkv, &l.gdn.in_proj_z, &l.gdn.in_proj_a, &l.gdn.in_proj_b,
                          &l.gdn.conv1d, &l.gdn.a_log, &l.gdn.dt_bias, &l.gdn.norm, &l.gdn.out_proj,
                          &l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj}) {
      add(*t);
    }
  };
  add(embed_tokens);
  add(final_norm);
  if (!tied) add(lm_head);
  for (const auto& l : layers) add_layer(l);
  if (mtp.present) {
    add(mtp.fc);
    add_layer(mtp.layer);
  }
  return n;
}

absl::StatusOr<core::Tensor> MapWeightSource::LoadF32(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(fmt::format("no parameter {}", name));
  return core::ToF32(it->second);
}

}  // namespace sparkserve::model
