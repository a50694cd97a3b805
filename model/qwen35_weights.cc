// Binding of Qwen3.5 checkpoint names to a rank's f32 weight shard (FORMATS.md §1-2, DESIGN.md §5).
#include "model/qwen35_weights.h"

#include <string>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::model {
namespace {

class Binder {
 public:
  Binder(const Qwen35Config& c, const WeightSource& src, const ShardPlan& plan)
      : c_(c), src_(src), plan_(plan), rs_(RankShapes::Of(c, plan)) {}

  // Loads `name` and checks its full shape.
  absl::StatusOr<core::Tensor> Full(const std::string& name, const core::Shape& shape) {
    if (!src_.Has(name)) return absl::NotFoundError(fmt::format("checkpoint has no parameter {}", name));
    ASSIGN_OR_RETURN(core::Tensor t, src_.LoadF32(name));
    if (t.shape() != shape) {
      return absl::InvalidArgumentError(fmt::format("parameter {} has shape {}, the config implies {}",
                                                    name, core::ShapeToString(t.shape()),
                                                    core::ShapeToString(shape)));
    }
    return t;
  }

  absl::StatusOr<AttentionWeights> Attention(const std::string& p) {
    const int64_t d = c_.hidden_size, hd = c_.head_dim;
    const int64_t H = c_.num_attention_heads, KV = c_.num_key_value_heads;
    const Range heads = plan_.Part(H), kv = plan_.Part(KV);
    AttentionWeights w;
    ASSIGN_OR_RETURN(core::Tensor q, Full(p + "q_proj.weight", {H * 2 * hd, d}));
    w.q_proj = TakeRows(q, {Times(heads, 2 * hd)});
    ASSIGN_OR_RETURN(core::Tensor k, Full(p + "k_proj.weight", {KV * hd, d}));
    w.k_proj = TakeRows(k, {Times(kv, hd)});
    ASSIGN_OR_RETURN(core::Tensor v, Full(p + "v_proj.weight", {KV * hd, d}));
    w.v_proj = TakeRows(v, {Times(kv, hd)});
    ASSIGN_OR_RETURN(core::Tensor o, Full(p + "o_proj.weight", {d, H * hd}));
    w.o_proj = TakeCols(o, {Times(heads, hd)});
    ASSIGN_OR_RETURN(w.q_norm, Full(p + "q_norm.weight", {hd}));
    ASSIGN_OR_RETURN(w.k_norm, Full(p + "k_norm.weight", {hd}));
    return w;
  }

  absl::StatusOr<GdnWeights> Gdn(const std::string& p) {
    const int64_t d = c_.hidden_size, dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim;
    const int64_t NK = c_.linear_num_key_heads, NV = c_.linear_num_value_heads;
    const int64_t K = c_.linear_conv_kernel_dim, C = 2 * NK * dk + NV * dv;
    const Range kh = plan_.Part(NK), vh = plan_.Part(NV);
    // Channels of [q | k | v] kept by this rank: its key heads' q and k, its value heads' v.
    const std::vector<Range> qkv = {Times(kh, dk), Shift(Times(kh, dk), NK * dk), Shift(Times(vh, dv), 2 * NK * dk)};
    GdnWeights w;
    ASSIGN_OR_RETURN(core::Tensor in_qkv, Full(p + "in_proj_qkv.weight", {C, d}));
    w.in_proj_qkv = TakeRows(in_qkv, qkv);
    ASSIGN_OR_RETURN(core::Tensor z, Full(p + "in_proj_z.weight", {NV * dv, d}));
    w.in_proj_z = TakeRows(z, {Times(vh, dv)});
    ASSIGN_OR_RETURN(core::Tensor a, Full(p + "in_proj_a.weight", {NV, d}));
    w.in_proj_a = TakeRows(a, {vh});
    ASSIGN_OR_RETURN(core::Tensor b, Full(p + "in_proj_b.weight", {NV, d}));
    w.in_proj_b = TakeRows(b, {vh});
    ASSIGN_OR_RETURN(core::Tensor conv, Full(p + "conv1d.weight", {C, 1, K}));
    ASSIGN_OR_RETURN(core::Tensor conv2, conv.Reshape({C, K}));
    w.conv1d = TakeRows(conv2, qkv);
    ASSIGN_OR_RETURN(core::Tensor alog, Full(p + "A_log", {NV}));
    w.a_log = TakeRows(alog, {vh});
    ASSIGN_OR_RETURN(core::Tensor dt, Full(p + "dt_bias", {NV}));
    w.dt_bias = TakeRows(dt, {vh});
    ASSIGN_OR_RETURN(w.norm, Full(p + "norm.weight", {dv}));
    ASSIGN_OR_RETURN(core::Tensor out, Full(p + "out_proj.weight", {d, NV * dv}));
    w.out_proj = TakeCols(out, {Times(vh, dv)});
    return w;
  }

  absl::StatusOr<MlpWeights> Mlp(const std::string& p) {
    const int64_t d = c_.hidden_size, F = c_.intermediate_size;
    const Range f = plan_.Part(F);
    MlpWeights w;
    ASSIGN_OR_RETURN(core::Tensor g, Full(p + "gate_proj.weight", {F, d}));
    w.gate_proj = TakeRows(g, {f});
    ASSIGN_OR_RETURN(core::Tensor u, Full(p + "up_proj.weight", {F, d}));
    w.up_proj = TakeRows(u, {f});
    ASSIGN_OR_RETURN(core::Tensor dn, Full(p + "down_proj.weight", {d, F}));
    w.down_proj = TakeCols(dn, {f});
    return w;
  }

  absl::StatusOr<LayerWeights> Layer(const std::string& p, LayerType type) {
    LayerWeights w;
    w.type = type;
    const int64_t d = c_.hidden_size;
    ASSIGN_OR_RETURN(w.input_layernorm, Full(p + "input_layernorm.weight", {d}));
    ASSIGN_OR_RETURN(w.post_attention_layernorm, Full(p + "post_attention_layernorm.weight", {d}));
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
  const ShardPlan& plan_;
  RankShapes rs_;
};

}  // namespace

absl::StatusOr<Qwen35Weights> Qwen35Weights::Load(const Qwen35Config& c, const WeightSource& src,
                                                  const ShardPlan& plan) {
  Binder b(c, src, plan);
  const std::string prefix(c.weight_prefix());
  const int64_t d = c.hidden_size, V = c.vocab_size;
  Qwen35Weights w;
  ASSIGN_OR_RETURN(w.embed_tokens, b.Full(prefix + "embed_tokens.weight", {V, d}));
  ASSIGN_OR_RETURN(w.final_norm, b.Full(prefix + "norm.weight", {d}));
  const Range vocab = b.shapes().vocab;
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed_tokens.Slice(vocab.first, vocab.second);
    w.tied = true;
  } else {
    ASSIGN_OR_RETURN(core::Tensor head, b.Full("lm_head.weight", {V, d}));
    w.lm_head = TakeRows(head, {vocab});
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights layer,
                     b.Layer(fmt::format("{}layers.{}.", prefix, i), c.layer_types[static_cast<size_t>(i)]));
    w.layers.push_back(std::move(layer));
  }
  if (c.mtp_num_hidden_layers > 0 && src.Has("mtp.fc.weight")) {
    MtpWeights& m = w.mtp;
    m.present = true;
    ASSIGN_OR_RETURN(m.fc, b.Full("mtp.fc.weight", {d, 2 * d}));
    ASSIGN_OR_RETURN(m.pre_fc_norm_embedding, b.Full("mtp.pre_fc_norm_embedding.weight", {d}));
    ASSIGN_OR_RETURN(m.pre_fc_norm_hidden, b.Full("mtp.pre_fc_norm_hidden.weight", {d}));
    ASSIGN_OR_RETURN(m.norm, b.Full("mtp.norm.weight", {d}));
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
