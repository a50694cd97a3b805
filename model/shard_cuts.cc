// The Qwen3.5 shard cuts (see shard_cuts.h).
#include "model/shard_cuts.h"

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::model {
namespace {

using quant::TensorCut;

class CutList {
 public:
  CutList(const Qwen35Config& c, const ShardPlan& plan) : c_(c), plan_(plan), rs_(RankShapes::Of(c, plan)) {}

  void Attention(const std::string& p) {
    const int64_t hd = c_.head_dim;
    const Range heads = plan_.Part(c_.num_attention_heads);
    cuts_[p + "q_proj"] = TensorCut::Rows({Times(heads, 2 * hd)});  // per head: q rows then gate rows
    cuts_[p + "k_proj"] = TensorCut::Rows({Times(rs_.kv_range, hd)});
    cuts_[p + "v_proj"] = TensorCut::Rows({Times(rs_.kv_range, hd)});
    cuts_[p + "o_proj"] = TensorCut::Cols({Times(heads, hd)});
    cuts_[p + "q_norm.weight"] = TensorCut::Whole();
    cuts_[p + "k_norm.weight"] = TensorCut::Whole();
  }

  void Gdn(const std::string& p) {
    const int64_t dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim, nk = c_.linear_num_key_heads;
    const Range kh = plan_.Part(nk), vh = plan_.Part(c_.linear_num_value_heads);
    // Channels of [q | k | v] kept by this rank: its key heads' q and k, its value heads' v.
    const std::vector<Range> qkv = {Times(kh, dk), Shift(Times(kh, dk), nk * dk), Shift(Times(vh, dv), 2 * nk * dk)};
    cuts_[p + "in_proj_qkv"] = TensorCut::Rows(qkv);
    cuts_[p + "conv1d.weight"] = TensorCut::Rows(qkv);
    cuts_[p + "in_proj_z"] = TensorCut::Rows({Times(vh, dv)});
    cuts_[p + "in_proj_a"] = TensorCut::Rows({vh});
    cuts_[p + "in_proj_b"] = TensorCut::Rows({vh});
    cuts_[p + "A_log"] = TensorCut::Rows({vh});
    cuts_[p + "dt_bias"] = TensorCut::Rows({vh});
    cuts_[p + "norm.weight"] = TensorCut::Whole();
    cuts_[p + "out_proj"] = TensorCut::Cols({Times(vh, dv)});
  }

  void Mlp(const std::string& p) {
    const Range f = plan_.Part(c_.intermediate_size);
    cuts_[p + "gate_proj"] = TensorCut::Rows({f});
    cuts_[p + "up_proj"] = TensorCut::Rows({f});
    cuts_[p + "down_proj"] = TensorCut::Cols({f});
  }

  void Layer(const std::string& p, LayerType type, const quant::Checkpoint& full) {
    cuts_[p + "input_layernorm.weight"] = TensorCut::Whole();
    cuts_[p + "post_attention_layernorm.weight"] = TensorCut::Whole();
    if (type == LayerType::kFullAttention) {
      Attention(p + "self_attn.");
      for (const char* scale : {"self_attn.k_scale", "self_attn.v_scale"}) {  // FP8 KV scales, when calibrated
        if (full.Tensor(p + scale).ok()) cuts_[p + scale] = TensorCut::Whole();
      }
    } else {
      Gdn(p + "linear_attn.");
    }
    Mlp(p + "mlp.");
  }

  void Whole(const std::string& name) { cuts_[name] = TensorCut::Whole(); }
  void Rows(const std::string& name, Range r) { cuts_[name] = TensorCut::Rows({r}); }
  const RankShapes& shapes() const { return rs_; }
  quant::ShardCuts Take() { return std::move(cuts_); }

 private:
  const Qwen35Config& c_;
  const ShardPlan& plan_;
  RankShapes rs_;
  quant::ShardCuts cuts_;
};

}  // namespace

absl::StatusOr<quant::ShardCuts> ShardCutsFor(const Qwen35Config& c, const ShardPlan& plan,
                                              const quant::Checkpoint& full) {
  CutList cuts(c, plan);
  const std::string prefix(c.weight_prefix());
  cuts.Whole(prefix + "embed_tokens");
  cuts.Whole(prefix + "norm.weight");
  if (!c.tie_word_embeddings) cuts.Rows("lm_head", cuts.shapes().vocab);  // tied: a view of the embedding
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    cuts.Layer(fmt::format("{}layers.{}.", prefix, i), c.layer_types[static_cast<size_t>(i)], full);
  }
  if (c.mtp_num_hidden_layers > 0 && full.FindModule("mtp.fc") != nullptr) {
    cuts.Whole("mtp.fc");
    for (const char* norm : {"mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"}) {
      cuts.Whole(norm);
    }
    cuts.Layer("mtp.layers.0.", LayerType::kFullAttention, full);
  }
  return cuts.Take();
}

absl::StatusOr<quant::Checkpoint> CutShard(const quant::Checkpoint& full, const Qwen35Config& config,
                                           const ShardPlan& plan) {
  ASSIGN_OR_RETURN(quant::ShardCuts cuts, ShardCutsFor(config, plan, full));
  return quant::CutCheckpoint(full, cuts, fmt::format("{} (rank {} of {})", full.dir(), plan.rank, plan.world));
}

}  // namespace sparkserve::model
