// CudaModelWeights::Load: checkpoint names -> device weights (FORMATS.md §1 for the names).
#include "model/cuda/cuda_weights.h"

#include <string>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::model::cuda {
namespace {

class DeviceBinder {
 public:
  DeviceBinder(const Qwen35Config& c, const ShardPlan& plan, const quant::Checkpoint& ckpt,
               const CudaLinearOptions& linear_options)
      : c_(c), rs_(RankShapes::Of(c, plan)), ckpt_(ckpt), linear_options_(linear_options) {}

  // The linear module `name` (without ".weight"), shape-checked.
  absl::StatusOr<const quant::QuantizedLinear*> Module(const std::string& name, int64_t out, int64_t in) {
    const quant::QuantizedLinear* m = ckpt_.FindModule(name);
    if (m == nullptr) return absl::NotFoundError(fmt::format("checkpoint has no linear {}.weight", name));
    if (m->out != out || m->in != in) {
      return absl::InvalidArgumentError(
          fmt::format("parameter {}.weight has shape [{}, {}], the config implies [{}, {}]", name, m->out, m->in, out, in));
    }
    return m;
  }

  absl::StatusOr<CudaLinear> Linear(const std::string& name, int64_t out, int64_t in) {
    ASSIGN_OR_RETURN(const quant::QuantizedLinear* m, Module(name, out, in));
    return CudaLinear::Upload(*m, linear_options_);
  }

  // Modules `names` (with their [out, in]) fused into `fused` when they can be, else one by one into `separate`.
  absl::Status FusedOrSeparate(const std::vector<std::pair<std::string, int64_t>>& names, int64_t in,
                               const std::string& fused_name, CudaLinear* fused, const std::vector<CudaLinear*>& separate) {
    std::vector<const quant::QuantizedLinear*> parts;
    for (const auto& [name, out] : names) {
      ASSIGN_OR_RETURN(const quant::QuantizedLinear* m, Module(name, out, in));
      parts.push_back(m);
    }
    if (CudaLinear::CanFuse(parts)) {
      ASSIGN_OR_RETURN(*fused, CudaLinear::UploadFused(parts, fused_name, linear_options_));
      return absl::OkStatus();
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      ASSIGN_OR_RETURN(*separate[i], CudaLinear::Upload(*parts[i], linear_options_));
    }
    return absl::OkStatus();
  }

  // A non-linear tensor widened to f32 with `numel` elements, uploaded.
  absl::StatusOr<DeviceBuffer<float>> Vector(const std::string& name, int64_t numel) {
    ASSIGN_OR_RETURN(core::Tensor t, ckpt_.DenseF32(name));
    if (t.numel() != numel) {
      return absl::InvalidArgumentError(fmt::format("parameter {} has {} elements ({}), the config implies {}", name,
                                                    t.numel(), core::ShapeToString(t.shape()), numel));
    }
    return DeviceBuffer<float>::FromHost(std::span<const float>(t.data<float>(), static_cast<size_t>(numel)));
  }

  absl::StatusOr<CudaAttentionWeights> Attention(const std::string& p) {
    const int64_t d = c_.hidden_size, hd = c_.head_dim, H = rs_.heads, KV = rs_.kv_heads;
    CudaAttentionWeights w;
    RETURN_IF_ERROR(FusedOrSeparate({{p + "q_proj", H * 2 * hd}, {p + "k_proj", KV * hd}, {p + "v_proj", KV * hd}}, d,
                                    p + "qkv_proj", &w.qkv, {&w.q_proj, &w.k_proj, &w.v_proj}));
    ASSIGN_OR_RETURN(w.o_proj, Linear(p + "o_proj", d, H * hd));
    ASSIGN_OR_RETURN(w.q_norm, Vector(p + "q_norm.weight", hd));
    ASSIGN_OR_RETURN(w.k_norm, Vector(p + "k_norm.weight", hd));
    return w;
  }

  absl::StatusOr<CudaGdnWeights> Gdn(const std::string& p) {
    const int64_t d = c_.hidden_size, dv = rs_.dv, NV = rs_.nv, K = c_.linear_conv_kernel_dim;
    const int64_t C = rs_.conv_channels();
    CudaGdnWeights w;
    RETURN_IF_ERROR(FusedOrSeparate({{p + "in_proj_qkv", C}, {p + "in_proj_z", NV * dv}}, d, p + "in_proj_qkvz",
                                    &w.qkvz, {&w.in_proj_qkv, &w.in_proj_z}));
    RETURN_IF_ERROR(
        FusedOrSeparate({{p + "in_proj_a", NV}, {p + "in_proj_b", NV}}, d, p + "in_proj_ab", &w.ab, {&w.in_proj_a, &w.in_proj_b}));
    ASSIGN_OR_RETURN(w.out_proj, Linear(p + "out_proj", d, NV * dv));
    ASSIGN_OR_RETURN(w.conv1d, Vector(p + "conv1d.weight", C * K));
    ASSIGN_OR_RETURN(w.a_log, Vector(p + "A_log", NV));
    ASSIGN_OR_RETURN(w.dt_bias, Vector(p + "dt_bias", NV));
    ASSIGN_OR_RETURN(w.norm, Vector(p + "norm.weight", dv));
    return w;
  }

  absl::StatusOr<CudaMlpWeights> Mlp(const std::string& p) {
    const int64_t d = c_.hidden_size, F = rs_.ffn;
    CudaMlpWeights w;
    RETURN_IF_ERROR(FusedOrSeparate({{p + "gate_proj", F}, {p + "up_proj", F}}, d, p + "gate_up_proj", &w.gate_up,
                                    {&w.gate_proj, &w.up_proj}));
    ASSIGN_OR_RETURN(w.down_proj, Linear(p + "down_proj", d, F));
    return w;
  }

  absl::StatusOr<CudaLayerWeights> Layer(const std::string& p, LayerType type) {
    const int64_t d = c_.hidden_size;
    CudaLayerWeights w;
    w.type = type;
    ASSIGN_OR_RETURN(w.input_layernorm, Vector(p + "input_layernorm.weight", d));
    ASSIGN_OR_RETURN(w.post_attention_layernorm, Vector(p + "post_attention_layernorm.weight", d));
    if (type == LayerType::kFullAttention) {
      ASSIGN_OR_RETURN(w.attn, Attention(p + "self_attn."));
    } else {
      ASSIGN_OR_RETURN(w.gdn, Gdn(p + "linear_attn."));
    }
    ASSIGN_OR_RETURN(w.mlp, Mlp(p + "mlp."));
    return w;
  }

  // The embedding table as bf16 [V, d] (raw bytes when the checkpoint stores dense bf16).
  absl::StatusOr<DeviceBuffer<__nv_bfloat16>> Embedding(const std::string& name, int64_t V, int64_t d) {
    const quant::QuantizedLinear* m = ckpt_.FindModule(name);
    if (m == nullptr) return absl::NotFoundError(fmt::format("checkpoint has no parameter {}.weight", name));
    if (m->out != V || m->in != d) {
      return absl::InvalidArgumentError(
          fmt::format("parameter {}.weight has shape [{}, {}], the config implies [{}, {}]", name, m->out, m->in, V, d));
    }
    ASSIGN_OR_RETURN(auto table, DeviceBuffer<__nv_bfloat16>::Allocate(static_cast<size_t>(V * d)));
    if (m->format == quant::WeightFormat::kDense && m->weight.dtype() == core::DType::kBF16) {
      RETURN_IF_ERROR(kernels::cuda::CudaStatus(
          cudaMemcpy(table.data(), m->weight.raw_data(), m->weight.nbytes(), cudaMemcpyHostToDevice), "upload embedding"));
      return table;
    }
    ASSIGN_OR_RETURN(core::Tensor f32, m->DequantizeToF32());
    std::vector<uint16_t> bf16(static_cast<size_t>(f32.numel()));
    for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = core::F32ToBf16(f32.data<float>()[i]);
    RETURN_IF_ERROR(kernels::cuda::CudaStatus(
        cudaMemcpy(table.data(), bf16.data(), bf16.size() * 2, cudaMemcpyHostToDevice), "upload embedding"));
    return table;
  }

 private:
  const Qwen35Config& c_;
  const RankShapes rs_;
  const quant::Checkpoint& ckpt_;
  const CudaLinearOptions linear_options_;
};

}  // namespace

absl::StatusOr<CudaModelWeights> CudaModelWeights::Load(const Qwen35Config& c, const ShardPlan& plan,
                                                        const quant::Checkpoint& ckpt,
                                                        const CudaLinearOptions& linear_options, bool load_mtp) {
  DeviceBinder b(c, plan, ckpt, linear_options);
  const std::string prefix(c.weight_prefix());
  const int64_t d = c.hidden_size, V = c.vocab_size;
  CudaModelWeights w;
  ASSIGN_OR_RETURN(w.embed_tokens, b.Embedding(prefix + "embed_tokens", V, d));
  ASSIGN_OR_RETURN(w.final_norm, b.Vector(prefix + "norm.weight", d));
  const Range vocab = RankShapes::Of(c, plan).vocab;  // this rank's lm_head rows
  const int64_t Vr = vocab.second - vocab.first;
  if (c.tie_word_embeddings) {
    w.lm_head = CudaLinear::Bf16View(w.embed_tokens.data() + vocab.first * d, static_cast<int>(Vr),
                                     static_cast<int>(d), "lm_head");
  } else {
    ASSIGN_OR_RETURN(w.lm_head, b.Linear("lm_head", Vr, d));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    ASSIGN_OR_RETURN(CudaLayerWeights layer,
                     b.Layer(fmt::format("{}layers.{}.", prefix, i), c.layer_types[static_cast<size_t>(i)]));
    w.layers.push_back(std::move(layer));
  }
  if (load_mtp && c.mtp_num_hidden_layers > 0 && ckpt.FindModule("mtp.fc") != nullptr) {
    CudaMtpWeights& m = w.mtp;
    ASSIGN_OR_RETURN(m.fc, b.Linear("mtp.fc", d, 2 * d));
    ASSIGN_OR_RETURN(m.pre_fc_norm_embedding, b.Vector("mtp.pre_fc_norm_embedding.weight", d));
    ASSIGN_OR_RETURN(m.pre_fc_norm_hidden, b.Vector("mtp.pre_fc_norm_hidden.weight", d));
    ASSIGN_OR_RETURN(m.norm, b.Vector("mtp.norm.weight", d));
    ASSIGN_OR_RETURN(m.layer, b.Layer("mtp.layers.0.", LayerType::kFullAttention));
    m.present = true;
  }
  return w;
}

namespace {

int64_t LayerWeightBytes(const CudaLayerWeights& l) {
  int64_t n = static_cast<int64_t>(l.input_layernorm.bytes() + l.post_attention_layernorm.bytes());
  auto add = [&](std::initializer_list<const CudaLinear*> linears) {
    for (const CudaLinear* x : linears) n += x->weight_bytes();  // absent ones hold 0 bytes
  };
  if (l.type == LayerType::kFullAttention) {
    add({&l.attn.qkv, &l.attn.q_proj, &l.attn.k_proj, &l.attn.v_proj, &l.attn.o_proj});
    n += static_cast<int64_t>(l.attn.q_norm.bytes() + l.attn.k_norm.bytes());
  } else {
    add({&l.gdn.qkvz, &l.gdn.in_proj_qkv, &l.gdn.in_proj_z, &l.gdn.ab, &l.gdn.in_proj_a, &l.gdn.in_proj_b,
         &l.gdn.out_proj});
    n += static_cast<int64_t>(l.gdn.conv1d.bytes() + l.gdn.a_log.bytes() + l.gdn.dt_bias.bytes() + l.gdn.norm.bytes());
  }
  add({&l.mlp.gate_up, &l.mlp.gate_proj, &l.mlp.up_proj, &l.mlp.down_proj});
  return n;
}

}  // namespace

int64_t CudaMtpWeights::weight_bytes() const {
  if (!present) return 0;
  return fc.weight_bytes() + LayerWeightBytes(layer) +
         static_cast<int64_t>(pre_fc_norm_embedding.bytes() + pre_fc_norm_hidden.bytes() + norm.bytes());
}

int64_t CudaModelWeights::decode_weight_bytes() const {
  int64_t n = lm_head.weight_bytes() + static_cast<int64_t>(final_norm.bytes());
  for (const CudaLayerWeights& l : layers) n += LayerWeightBytes(l);
  return n;
}

}  // namespace sparkserve::model::cuda
