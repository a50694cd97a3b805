// Random-weight Qwen3.5 demo checkpoints (see demo_model.h).
#include "head/demo/demo_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "head/demo/demo_model_tokenizer.h"
#include "nlohmann/json.hpp"
#include "quant/quantizer/quantize_checkpoint.h"
#include "quant/quantizer/recipe.h"

namespace sparkserve::head {
namespace {

using nlohmann::ordered_json;
using quant::SourceTensorInfo;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class DemoSource : public quant::TensorSource {
 public:
  DemoSource(std::vector<SourceTensorInfo> tensors, uint64_t seed) : tensors_(std::move(tensors)), seed_(seed) {}
  std::vector<SourceTensorInfo> List() const override { return tensors_; }
  absl::StatusOr<core::Tensor> Load(const std::string& name) const override {
    for (const SourceTensorInfo& t : tensors_) {
      if (t.name == name) return DemoTensorValues(t, seed_);
    }
    return absl::NotFoundError(fmt::format("demo model has no tensor {}", name));
  }

 private:
  std::vector<SourceTensorInfo> tensors_;
  uint64_t seed_;
};

ordered_json ConfigJson(const DemoShape& s, const std::vector<int32_t>& eos) {
  ordered_json layer_types = ordered_json::array();
  for (int64_t i = 0; i < s.layers; ++i) layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"attention_bias", false},
          {"attention_dropout", 0.0},
          {"attn_output_gate", true},
          {"bos_token_id", nullptr},
          {"dtype", "bfloat16"},
          {"eos_token_id", eos[0]},
          {"full_attention_interval", 4},
          {"head_dim", s.head_dim},
          {"hidden_act", "silu"},
          {"hidden_size", s.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", s.intermediate},
          {"layer_types", layer_types},
          {"linear_conv_kernel_dim", s.conv_kernel},
          {"linear_key_head_dim", s.lin_k_dim},
          {"linear_num_key_heads", s.lin_k_heads},
          {"linear_num_value_heads", s.lin_v_heads},
          {"linear_value_head_dim", s.lin_v_dim},
          {"max_position_embeddings", 262144},
          {"model_type", "qwen3_5_text"},
          {"mtp_num_hidden_layers", 1},
          {"mtp_use_dedicated_embeddings", false},
          {"num_attention_heads", s.heads},
          {"num_hidden_layers", s.layers},
          {"num_key_value_heads", s.kv_heads},
          {"pad_token_id", nullptr},
          {"partial_rotary_factor", 0.25},
          {"rms_norm_eps", 1e-06},
          {"rope_parameters",
           {{"mrope_interleaved", true},
            {"mrope_section", s.mrope_section},
            {"partial_rotary_factor", 0.25},
            {"rope_theta", 10000000.0},
            {"rope_type", "default"}}},
          {"tie_word_embeddings", true},
          {"transformers_version", "5.17.0"},
          {"use_cache", true},
          {"vocab_size", s.vocab}};
}

}  // namespace

absl::StatusOr<DemoShape> DemoShapeFor(const std::string& shape, int64_t tokenizer_tokens) {
  DemoShape s;
  if (shape == "4b") {
    s = {2560, 9216, 32, 16, 4, 256, 16, 32, 128, 128, 4, 248320, {11, 11, 10}};
  } else if (shape == "tiny") {
    // Vocabulary: the tokenizer's tokens rounded up to a multiple of 64.
    s = {128, 256, 4, 4, 2, 32, 2, 4, 32, 32, 4, (tokenizer_tokens + 63) / 64 * 64, {2, 1, 1}};
  } else {
    return absl::InvalidArgumentError(fmt::format("unknown demo shape \"{}\" (expected tiny or 4b)", shape));
  }
  return s;
}

std::vector<SourceTensorInfo> DemoTensors(const DemoShape& s) {
  using core::DType;
  std::vector<SourceTensorInfo> t;
  auto add = [&](std::string name, core::Shape shape) { t.push_back({std::move(name), DType::kBF16, std::move(shape)}); };
  const int64_t H = s.hidden, I = s.intermediate, hd = s.head_dim;
  const int64_t conv = 2 * s.lin_k_heads * s.lin_k_dim + s.lin_v_heads * s.lin_v_dim;
  const int64_t vdim = s.lin_v_heads * s.lin_v_dim;
  add("model.embed_tokens.weight", {s.vocab, H});
  auto attention = [&](const std::string& p) {
    add(p + "self_attn.q_proj.weight", {2 * s.heads * hd, H});
    add(p + "self_attn.k_proj.weight", {s.kv_heads * hd, H});
    add(p + "self_attn.v_proj.weight", {s.kv_heads * hd, H});
    add(p + "self_attn.o_proj.weight", {H, s.heads * hd});
    add(p + "self_attn.q_norm.weight", {hd});
    add(p + "self_attn.k_norm.weight", {hd});
  };
  auto mlp_norms = [&](const std::string& p) {
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    add(p + "mlp.gate_proj.weight", {I, H});
    add(p + "mlp.up_proj.weight", {I, H});
    add(p + "mlp.down_proj.weight", {H, I});
  };
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    mlp_norms(p);
    if ((i + 1) % 4 == 0) {
      attention(p);
    } else {
      add(p + "linear_attn.in_proj_qkv.weight", {conv, H});
      add(p + "linear_attn.in_proj_z.weight", {vdim, H});
      add(p + "linear_attn.in_proj_a.weight", {s.lin_v_heads, H});
      add(p + "linear_attn.in_proj_b.weight", {s.lin_v_heads, H});
      add(p + "linear_attn.conv1d.weight", {conv, 1, s.conv_kernel});
      add(p + "linear_attn.A_log", {s.lin_v_heads});
      add(p + "linear_attn.dt_bias", {s.lin_v_heads});
      add(p + "linear_attn.norm.weight", {s.lin_v_dim});
      add(p + "linear_attn.out_proj.weight", {H, vdim});
    }
  }
  add("model.norm.weight", {H});
  add("mtp.fc.weight", {H, 2 * H});
  add("mtp.pre_fc_norm_embedding.weight", {H});
  add("mtp.pre_fc_norm_hidden.weight", {H});
  add("mtp.norm.weight", {H});
  mlp_norms("mtp.layers.0.");
  attention("mtp.layers.0.");
  return t;
}

core::Tensor DemoTensorValues(const SourceTensorInfo& info, uint64_t seed) {
  core::Tensor t = core::Tensor::Empty(info.shape, core::DType::kBF16);
  uint16_t* out = t.data<uint16_t>();
  const int64_t n = t.numel();
  uint64_t state = Fnv1a(info.name) ^ (seed * 0xd1b54a32d192ed03ull);
  const std::string& name = info.name;
  auto normal = [&state]() {
    const uint64_t r = SplitMix(state);
    const float sum = static_cast<float>(r & 0xffff) + static_cast<float>((r >> 16) & 0xffff) +
                      static_cast<float>((r >> 32) & 0xffff) + static_cast<float>(r >> 48);
    // Irwin-Hall(4): mean 2, variance 1/3 on [0, 4).
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
  };
  if (EndsWith(name, "A_log")) {
    for (int64_t i = 0; i < n; ++i) {
      const float u = static_cast<float>(SplitMix(state) >> 40) * (1.0f / 16777216.0f);
      out[i] = core::F32ToBf16(std::log(0.01f + 3.99f * u));
    }
  } else if (EndsWith(name, "dt_bias")) {
    for (int64_t i = 0; i < n; ++i) out[i] = core::F32ToBf16(1.0f);
  } else if (EndsWith(name, "linear_attn.norm.weight")) {
    for (int64_t i = 0; i < n; ++i) out[i] = core::F32ToBf16(1.0f + 0.1f * normal());
  } else {
    const float scale = name.find("norm") != std::string::npos ? 0.1f
                        : name.find("conv1d") != std::string::npos ? 0.3f
                                                                    : 0.02f;
    for (int64_t i = 0; i < n; ++i) out[i] = core::F32ToBf16(scale * normal());
  }
  return t;
}

absl::StatusOr<quant::QuantizeReport> WriteDemoModel(const std::string& out_dir, const DemoModelOptions& options) {
  const bool tiny = options.shape == "tiny";
  DemoTokenizer tok;
  if (tiny) tok = BuildDemoTokenizer();
  ASSIGN_OR_RETURN(DemoShape shape, DemoShapeFor(options.shape, tok.num_tokens));
  ASSIGN_OR_RETURN(quant::Recipe recipe, quant::Recipe::BuiltIn(options.recipe));
  // <|im_end|>, <|endoftext|> (FORMATS.md §1 ids for the 4B vocabulary).
  const std::vector<int32_t> eos = tiny ? std::vector<int32_t>{tok.im_end_id, tok.endoftext_id}
                                        : std::vector<int32_t>{248046, 248044};
  ASSIGN_OR_RETURN(quant::OutputDirectory out, quant::OutputDirectory::Begin(out_dir));
  DemoSource source(DemoTensors(shape), options.seed);
  quant::QuantizeOptions qo;
  qo.tie_word_embeddings = true;
  qo.text_prefix = "model.";
  qo.threads = options.threads;
  qo.progress = options.progress;
  qo.max_shard_bytes = options.max_shard_bytes;
  ASSIGN_OR_RETURN(quant::QuantizeReport report, quant::QuantizeTensors(source, recipe, qo, out.path()));
  const std::filesystem::path dir(out.path());
  const ordered_json gen = {{"bos_token_id", nullptr}, {"do_sample", true}, {"eos_token_id", eos},
                            {"pad_token_id", eos[1]},  {"temperature", 1.0}, {"top_k", 20},
                            {"top_p", 0.95},           {"presence_penalty", 1.5}};
  RETURN_IF_ERROR(quant::WriteTextFile((dir / "generation_config.json").string(), gen.dump(2) + "\n"));
  if (tiny) {
    RETURN_IF_ERROR(quant::WriteTextFile((dir / "tokenizer.json").string(), tok.tokenizer_json));
    RETURN_IF_ERROR(quant::WriteTextFile((dir / "tokenizer_config.json").string(), tok.tokenizer_config_json));
  }
  ASSIGN_OR_RETURN(std::string config, quant::QuantizedConfigJson(ConfigJson(shape, eos).dump(), report));
  RETURN_IF_ERROR(quant::WriteTextFile((dir / "config.json").string(), config));
  RETURN_IF_ERROR(out.Commit());
  return report;
}

}  // namespace sparkserve::head
