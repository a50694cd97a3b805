// qwen35 GGUF -> Hugging Face directory: tensor names, undone value transforms, config.json (see
// gguf_model.h); the tokenizer files come from gguf_tokenizer_files.h.
#include "quant/gguf_model.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "quant/gguf_dequant.h"
#include "quant/gguf_reader.h"
#include "quant/gguf_tokenizer_files.h"
#include "quant/quantizer/quantize_checkpoint.h"
#include "quant/safetensors_writer.h"
#include "spdlog/spdlog.h"

namespace sparkserve::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct Hparams {
  int num_layers = 0, mtp_layers = 0;
  int64_t hidden = 0, intermediate = 0, heads = 0, kv_heads = 0, head_dim = 0, context = 0;
  int64_t conv_kernel = 0, k_head_dim = 0, v_head_dim = 0, k_heads = 0, v_heads = 0, interval = 4, rope_dims = 0;
  double eps = 1e-6, rope_theta = 1e7;
  std::vector<int64_t> mrope_sections;
};

absl::StatusOr<int64_t> Int(const GgufFile& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(fmt::format("{}: metadata '{}' is missing", f.path(), key));
  }
  absl::StatusOr<int64_t> x = v->AsInt();
  if (!x.ok() || *x < 0 || *x > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(fmt::format("{}: metadata '{}' is not a sensible non-negative integer", f.path(), key));
  }
  return *x;
}

absl::StatusOr<double> Float(const GgufFile& f, const std::string& key, double fallback) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return fallback;
  absl::StatusOr<double> x = v->AsFloat();
  if (!x.ok()) return absl::InvalidArgumentError(fmt::format("{}: metadata '{}' is not a number", f.path(), key));
  return *x;
}

absl::StatusOr<Hparams> ReadHparams(const GgufFile& f) {
  const GgufValue* arch = f.Find("general.architecture");
  if (arch == nullptr || arch->type != GgufValueType::kString) {
    return absl::InvalidArgumentError(fmt::format("{}: no general.architecture", f.path()));
  }
  if (arch->s != "qwen35") {
    return absl::UnimplementedError(fmt::format("{}: architecture '{}' (only llama.cpp's qwen35, the dense Qwen3.5, is read)",
                                                f.path(), arch->s));
  }
  const std::string a = "qwen35.";
  Hparams h;
  ASSIGN_OR_RETURN(int64_t blocks, Int(f, a + "block_count"));
  ASSIGN_OR_RETURN(int64_t nextn, Int(f, a + "nextn_predict_layers", 0));
  if (nextn > blocks || blocks - nextn < 1 || blocks > 4096) {
    return absl::InvalidArgumentError(fmt::format("{}: block_count {} with nextn_predict_layers {}", f.path(), blocks, nextn));
  }
  h.num_layers = static_cast<int>(blocks - nextn);
  h.mtp_layers = static_cast<int>(nextn);
  ASSIGN_OR_RETURN(h.hidden, Int(f, a + "embedding_length"));
  ASSIGN_OR_RETURN(h.intermediate, Int(f, a + "feed_forward_length"));
  ASSIGN_OR_RETURN(h.heads, Int(f, a + "attention.head_count"));
  ASSIGN_OR_RETURN(h.kv_heads, Int(f, a + "attention.head_count_kv"));
  ASSIGN_OR_RETURN(h.head_dim, Int(f, a + "attention.key_length"));
  ASSIGN_OR_RETURN(h.context, Int(f, a + "context_length", 262144));
  ASSIGN_OR_RETURN(h.conv_kernel, Int(f, a + "ssm.conv_kernel"));
  ASSIGN_OR_RETURN(h.k_head_dim, Int(f, a + "ssm.state_size"));
  ASSIGN_OR_RETURN(h.k_heads, Int(f, a + "ssm.group_count"));
  ASSIGN_OR_RETURN(h.v_heads, Int(f, a + "ssm.time_step_rank"));
  ASSIGN_OR_RETURN(int64_t inner, Int(f, a + "ssm.inner_size"));
  ASSIGN_OR_RETURN(h.interval, Int(f, a + "full_attention_interval", 4));
  ASSIGN_OR_RETURN(h.rope_dims, Int(f, a + "rope.dimension_count", h.head_dim / 4));
  ASSIGN_OR_RETURN(h.eps, Float(f, a + "attention.layer_norm_rms_epsilon", 1e-6));
  ASSIGN_OR_RETURN(h.rope_theta, Float(f, a + "rope.freq_base", 1e7));
  if (h.v_heads == 0 || h.k_heads == 0 || inner % h.v_heads != 0 || h.v_heads % h.k_heads != 0 || h.interval == 0 ||
      h.head_dim == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: inconsistent ssm/attention sizes", f.path()));
  }
  h.v_head_dim = inner / h.v_heads;
  if (const GgufValue* s = f.Find(a + "rope.dimension_sections"); s != nullptr && s->type == GgufValueType::kArray) {
    for (const GgufValue& e : s->array) {
      ASSIGN_OR_RETURN(int64_t x, e.AsInt());
      h.mrope_sections.push_back(x);
    }
  }
  while (h.mrope_sections.size() > 3) h.mrope_sections.pop_back();
  return h;
}

std::string ConfigJson(const Hparams& h, int64_t vocab, bool tied, const std::vector<int64_t>& eos, std::optional<int64_t> bos) {
  ordered_json c;
  c["architectures"] = {"Qwen3_5ForCausalLM"};
  c["model_type"] = "qwen3_5_text";
  c["vocab_size"] = vocab;
  c["hidden_size"] = h.hidden;
  c["intermediate_size"] = h.intermediate;
  c["num_hidden_layers"] = h.num_layers;
  c["num_attention_heads"] = h.heads;
  c["num_key_value_heads"] = h.kv_heads;
  c["head_dim"] = h.head_dim;
  c["hidden_act"] = "silu";
  c["rms_norm_eps"] = h.eps;
  c["max_position_embeddings"] = h.context;
  c["attn_output_gate"] = true;
  c["linear_conv_kernel_dim"] = h.conv_kernel;
  c["linear_key_head_dim"] = h.k_head_dim;
  c["linear_value_head_dim"] = h.v_head_dim;
  c["linear_num_key_heads"] = h.k_heads;
  c["linear_num_value_heads"] = h.v_heads;
  c["full_attention_interval"] = h.interval;
  ordered_json types = ordered_json::array();
  for (int i = 0; i < h.num_layers; ++i) types.push_back((i + 1) % h.interval == 0 ? "full_attention" : "linear_attention");
  c["layer_types"] = types;
  ordered_json rope = {{"rope_type", "default"}, {"rope_theta", h.rope_theta},
                       {"partial_rotary_factor", static_cast<double>(h.rope_dims) / static_cast<double>(h.head_dim)}};
  if (!h.mrope_sections.empty()) {
    rope["mrope_section"] = h.mrope_sections;
    rope["mrope_interleaved"] = true;
  }
  c["rope_parameters"] = rope;
  c["tie_word_embeddings"] = tied;
  c["mtp_num_hidden_layers"] = h.mtp_layers;
  if (bos) c["bos_token_id"] = *bos;
  if (!eos.empty()) c["eos_token_id"] = eos.size() == 1 ? ordered_json(eos[0]) : ordered_json(eos);
  c["torch_dtype"] = "bfloat16";
  return c.dump(2) + "\n";
}

// The inverse of llama.cpp's value-head reorder along one dimension: `x` viewed as [outer, n, inner]
// where n = nk * r * hd is the reordered dimension (tiled: [r, nk, hd]) goes back to grouped
// ([nk, r, hd]).
void UntileHeads(std::vector<float>& x, int64_t outer, int64_t nk, int64_t r, int64_t hd, int64_t inner,
                 int64_t dim_offset, int64_t dim_total) {
  std::vector<float> tmp(static_cast<size_t>(nk * r * hd * inner));
  for (int64_t o = 0; o < outer; ++o) {
    float* base = x.data() + (o * dim_total + dim_offset) * inner;
    for (int64_t k = 0; k < nk; ++k)
      for (int64_t j = 0; j < r; ++j)
        for (int64_t d = 0; d < hd; ++d)
          std::copy_n(base + ((j * nk + k) * hd + d) * inner, inner, tmp.data() + ((k * r + j) * hd + d) * inner);
    std::copy(tmp.begin(), tmp.end(), base);
  }
}

core::Tensor ToTensor(const std::vector<float>& v, core::Shape shape, bool bf16) {
  if (!bf16) return core::Tensor::FromF32(std::move(shape), v);
  core::Tensor t = core::Tensor::Empty(std::move(shape), core::DType::kBF16);
  uint16_t* p = t.data<uint16_t>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = core::F32ToBf16(v[i]);
  return t;
}

}  // namespace

std::string GgufToHfName(const std::string& name, int num_layers) {
  static const std::map<std::string, std::string> kTop = {
      {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"}};
  if (auto it = kTop.find(name); it != kTop.end()) return it->second;
  static const std::regex kBlk(R"(blk\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(name, m, kBlk) || m[1].length() > 5) return "";
  const int bid = std::stoi(m[1].str());
  const std::string rest = m[2].str();
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"}, {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"}, {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"}, {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
      {"ssm_beta.weight", "linear_attn.in_proj_b.weight"}, {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
      {"ssm_a", "linear_attn.A_log"}, {"ssm_dt.bias", "linear_attn.dt_bias"},
      {"ssm_conv1d.weight", "linear_attn.conv1d.weight"}, {"ssm_norm.weight", "linear_attn.norm.weight"},
      {"ssm_out.weight", "linear_attn.out_proj.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"}, {"ffn_down.weight", "mlp.down_proj.weight"}};
  static const std::map<std::string, std::string> kNextn = {
      {"nextn.eh_proj.weight", "mtp.fc.weight"}, {"nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight"},
      {"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight"}, {"nextn.shared_head_norm.weight", "mtp.norm.weight"}};
  if (bid >= num_layers) {
    if (auto it = kNextn.find(rest); it != kNextn.end()) return bid == num_layers ? it->second : "";
    if (auto it = kLayer.find(rest); it != kLayer.end()) return fmt::format("mtp.layers.{}.{}", bid - num_layers, it->second);
    return "";
  }
  if (auto it = kLayer.find(rest); it != kLayer.end()) return fmt::format("model.layers.{}.{}", bid, it->second);
  return "";
}

absl::Status WriteGgufModelDirectory(const std::string& gguf_path, const std::string& out_dir) {
  ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(gguf_path));
  ASSIGN_OR_RETURN(Hparams h, ReadHparams(f));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(fmt::format("{}: cannot create: {}", out_dir, ec.message()));

  const int64_t r = h.v_heads / h.k_heads;
  const bool reorder = r > 1;
  NamedTensors tensors;
  int64_t vocab = 0;
  bool has_output = false;
  for (const GgufTensorInfo& t : f.header().tensors) {
    const std::string hf = GgufToHfName(t.name, h.num_layers);
    if (hf.empty()) {
      spdlog::warn("{}: tensor '{}' is not part of a qwen35 model; skipped", gguf_path, t.name);
      continue;
    }
    std::vector<float> v(static_cast<size_t>(t.elements));
    RETURN_IF_ERROR(core::Annotate(DequantizeGgml(t.type, f.Data(t), v.data(), t.elements), fmt::format("{}: {}", gguf_path, t.name)));
    const std::vector<int64_t> dims = t.shape();
    core::Shape shape(dims.begin(), dims.end());
    // Every RMSNorm weight but the GDN output norm's was stored +1 (the MTP pre-fc norms too).
    const bool is_norm = (hf.ends_with("norm.weight") || hf.find(".pre_fc_norm_") != std::string::npos) &&
                         !hf.ends_with("linear_attn.norm.weight");
    if (is_norm) {
      for (float& x : v) x -= 1.0f;
    }
    auto bad_shape = [&] {
      return absl::InvalidArgumentError(fmt::format("{}: tensor '{}' has shape {}, which does not fit the model's sizes",
                                                    gguf_path, t.name, core::ShapeToString(shape)));
    };
    const int64_t vdim = h.v_heads * h.v_head_dim, kdim = h.k_heads * h.k_head_dim;
    if (hf.ends_with("A_log")) {
      for (float& x : v) x = static_cast<float>(std::log(-static_cast<double>(x)));
    }
    if (reorder && hf.find("linear_attn.") != std::string::npos) {
      const int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1] : 1;
      if (hf.ends_with("in_proj_qkv.weight")) {
        if (rows != 2 * kdim + vdim) return bad_shape();
        UntileHeads(v, 1, h.k_heads, r, h.v_head_dim, cols, 2 * kdim, rows);
      } else if (hf.ends_with("in_proj_z.weight")) {
        if (rows != vdim) return bad_shape();
        UntileHeads(v, 1, h.k_heads, r, h.v_head_dim, cols, 0, rows);
      } else if (hf.ends_with("in_proj_a.weight") || hf.ends_with("in_proj_b.weight") || hf.ends_with("A_log") ||
                 hf.ends_with("dt_bias")) {
        if (rows != h.v_heads) return bad_shape();
        UntileHeads(v, 1, h.k_heads, r, 1, cols, 0, rows);
      } else if (hf.ends_with("conv1d.weight")) {
        if (rows != 2 * kdim + vdim) return bad_shape();
        UntileHeads(v, 1, h.k_heads, r, h.v_head_dim, cols, 2 * kdim, rows);
      } else if (hf.ends_with("out_proj.weight")) {
        if (cols != vdim) return bad_shape();
        UntileHeads(v, rows, h.k_heads, r, h.v_head_dim, 1, 0, cols);
      }
    }
    if (hf.ends_with("conv1d.weight")) {
      if (shape.size() != 2) return bad_shape();
      shape = {shape[0], 1, shape[1]};
    }
    if (hf == "model.embed_tokens.weight") vocab = shape[0];
    if (hf == "lm_head.weight") has_output = true;
    const bool bf16 = shape.size() == 2 && !hf.ends_with("conv1d.weight");
    tensors.emplace_back(hf, ToTensor(v, shape, bf16));
  }
  if (vocab == 0) return absl::InvalidArgumentError(fmt::format("{}: no token_embd.weight", gguf_path));
  ASSIGN_OR_RETURN(GgufTokenizerFiles tok, BuildGgufTokenizerFiles(f));
  RETURN_IF_ERROR(WriteSafetensors((fs::path(out_dir) / "model.safetensors").string(), tensors, {{"format", "pt"}}));
  tensors.clear();
  RETURN_IF_ERROR(WriteTextFile((fs::path(out_dir) / "tokenizer.json").string(), tok.tokenizer_json));
  RETURN_IF_ERROR(WriteTextFile((fs::path(out_dir) / "tokenizer_config.json").string(), tok.tokenizer_config_json));
  RETURN_IF_ERROR(WriteTextFile((fs::path(out_dir) / "generation_config.json").string(), tok.generation_config_json));
  RETURN_IF_ERROR(WriteTextFile((fs::path(out_dir) / "config.json").string(),
                                ConfigJson(h, vocab, !has_output, tok.eos_ids, tok.bos_id)));
  spdlog::info("{}: qwen35 GGUF ({} layers, MTP {}) dequantised to bf16 into {}", gguf_path, h.num_layers, h.mtp_layers, out_dir);
  return absl::OkStatus();
}

}  // namespace sparkserve::quant
