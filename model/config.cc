// Parsing and validation of Qwen3.5 config.json / generation_config.json (see config.h).
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::model {
namespace {

using nlohmann::json;

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

std::string Preview(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Typed access to one JSON object's fields, with errors naming the file and the field's full path
// ("config.json: text_config.hidden_size: ..."). Absent and null fields read as "not given".
class FieldReader {
 public:
  FieldReader(const json& obj, std::string file, std::string prefix)
      : obj_(obj), file_(std::move(file)), prefix_(std::move(prefix)) {}

  const std::string& file() const { return file_; }
  std::string Path(std::string_view key) const { return fmt::format("{}{}", prefix_, key); }
  absl::Status Error(std::string_view key, std::string_view what) const {
    return Invalid(fmt::format("{}: field '{}': {}", file_, Path(key), what));
  }

  // The field, or nullptr when absent or null.
  const json* Find(std::string_view key) const {
    auto it = obj_.find(std::string(key));
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  absl::StatusOr<std::optional<int64_t>> OptInt(std::string_view key) const {
    const json* v = Find(key);
    if (!v) return std::optional<int64_t>();
    if (!v->is_number_integer()) return Error(key, fmt::format("expected an integer, got {}", Preview(*v)));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return Error(key, fmt::format("integer out of range: {}", Preview(*v)));
    return std::optional<int64_t>(v->get<int64_t>());
  }
  absl::StatusOr<int64_t> PositiveInt(std::string_view key) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(key));
    if (!v) return Error(key, "required field is missing");
    if (*v <= 0) return Error(key, fmt::format("must be positive, got {}", *v));
    return *v;
  }
  absl::StatusOr<std::optional<double>> OptNumber(std::string_view key) const {
    const json* v = Find(key);
    if (!v) return std::optional<double>();
    if (!v->is_number()) return Error(key, fmt::format("expected a number, got {}", Preview(*v)));
    double d = v->get<double>();
    if (!std::isfinite(d)) return Error(key, "must be finite");
    return std::optional<double>(d);
  }
  absl::StatusOr<std::optional<bool>> OptBool(std::string_view key) const {
    const json* v = Find(key);
    if (!v) return std::optional<bool>();
    if (!v->is_boolean()) return Error(key, fmt::format("expected true or false, got {}", Preview(*v)));
    return std::optional<bool>(v->get<bool>());
  }
  absl::StatusOr<std::optional<std::string>> OptString(std::string_view key) const {
    const json* v = Find(key);
    if (!v) return std::optional<std::string>();
    if (!v->is_string()) return Error(key, fmt::format("expected a string, got {}", Preview(*v)));
    return std::optional<std::string>(v->get<std::string>());
  }
  // A token id or a list of them (`eos_token_id`); empty when absent.
  absl::StatusOr<std::vector<int32_t>> TokenIds(std::string_view key) const {
    std::vector<int32_t> ids;
    const json* v = Find(key);
    if (!v) return ids;
    auto one = [&](const json& e) -> absl::Status {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
        return Error(key, fmt::format("expected a token id (non-negative integer) or a list of them, got {}",
                                      Preview(*v)));
      ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
      return absl::OkStatus();
    };
    if (v->is_array()) {
      for (const json& e : *v) RETURN_IF_ERROR(one(e));
    } else {
      RETURN_IF_ERROR(one(*v));
    }
    return ids;
  }
  absl::StatusOr<std::optional<int32_t>> OptTokenId(std::string_view key) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(key));
    if (!v) return std::optional<int32_t>();
    if (*v < 0 || *v > INT32_MAX) return Error(key, fmt::format("not a token id: {}", *v));
    return std::optional<int32_t>(static_cast<int32_t>(*v));
  }

 private:
  const json& obj_;
  std::string file_;
  std::string prefix_;
};

absl::StatusOr<json> ParseJsonObject(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Invalid(fmt::format("{}: not valid JSON", file));
  if (!j.is_object()) return Invalid(fmt::format("{}: expected a JSON object at the top level", file));
  return j;
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open (missing or unreadable)", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", path.string()));
  return ss.str();
}

absl::StatusOr<std::vector<LayerType>> ReadLayerTypes(const FieldReader& f, int64_t num_layers) {
  std::vector<LayerType> types;
  if (const json* lt = f.Find("layer_types")) {
    if (!lt->is_array()) return f.Error("layer_types", fmt::format("expected a list of strings, got {}", Preview(*lt)));
    if (static_cast<int64_t>(lt->size()) != num_layers)
      return f.Error("layer_types", fmt::format("has {} entries but num_hidden_layers is {}", lt->size(), num_layers));
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& e = (*lt)[i];
      std::string name = e.is_string() ? e.get<std::string>() : e.dump();
      // transformers' remap_legacy_layer_types: "mamba" -> linear, "attention" -> full.
      if (name == "linear_attention" || name == "mamba") {
        types.push_back(LayerType::kLinearAttention);
      } else if (name == "full_attention" || name == "attention") {
        types.push_back(LayerType::kFullAttention);
      } else {
        return f.Error("layer_types", fmt::format("entry {} is {}; expected \"linear_attention\" or \"full_attention\"",
                                                  i, e.dump()));
      }
    }
    return types;
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> interval, f.OptInt("full_attention_interval"));
  int64_t every = interval.value_or(4);  // transformers' default when neither field is given
  if (every <= 0) return f.Error("full_attention_interval", fmt::format("must be positive, got {}", every));
  for (int64_t i = 0; i < num_layers; ++i)
    types.push_back((i + 1) % every == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  return types;
}

absl::StatusOr<RopeConfig> ReadRope(const FieldReader& text) {
  RopeConfig rope;
  // transformers 5 (convert_rope_params_to_dict): `rope_scaling or rope_parameters`, then the
  // top-level rope_theta / partial_rotary_factor fill in what the dict lacks.
  const char* dict_key = text.Has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  const json empty = json::object();
  const json* dict = text.Find(dict_key);
  if (dict && !dict->is_object())
    return text.Error(dict_key, fmt::format("expected an object, got {}", Preview(*dict)));
  FieldReader r(dict ? *dict : empty, text.file(), text.Path(dict_key) + ".");

  ASSIGN_OR_RETURN(std::optional<std::string> type, r.OptString("rope_type"));
  if (!type) { ASSIGN_OR_RETURN(type, r.OptString("type")); }
  if (type) rope.rope_type = *type;
  if (rope.rope_type != "default" && rope.rope_type != "yarn")
    return r.Error("rope_type", fmt::format("unsupported rope type \"{}\" (supported: default, yarn)", rope.rope_type));

  ASSIGN_OR_RETURN(std::optional<double> theta, r.OptNumber("rope_theta"));
  if (!theta) { ASSIGN_OR_RETURN(theta, text.OptNumber("rope_theta")); }
  if (theta) rope.theta = *theta;
  if (rope.theta <= 0) return r.Error("rope_theta", fmt::format("must be positive, got {}", rope.theta));

  ASSIGN_OR_RETURN(std::optional<double> prf, r.OptNumber("partial_rotary_factor"));
  if (!prf) { ASSIGN_OR_RETURN(prf, text.OptNumber("partial_rotary_factor")); }
  if (prf) rope.partial_rotary_factor = *prf;
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1))
    return r.Error("partial_rotary_factor", fmt::format("must be in (0, 1], got {}", rope.partial_rotary_factor));

  rope.mrope_section_field = r.Path("mrope_section");
  if (const json* ms = r.Find("mrope_section")) {
    if (!ms->is_array() || ms->empty())
      return r.Error("mrope_section", fmt::format("expected a list of integers, got {}", Preview(*ms)));
    for (const json& e : *ms) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0)
        return r.Error("mrope_section", fmt::format("expected non-negative integers, got {}", Preview(*ms)));
      rope.mrope_section.push_back(e.get<int64_t>());
    }
  }
  ASSIGN_OR_RETURN(std::optional<bool> interleaved, r.OptBool("mrope_interleaved"));
  if (interleaved) rope.mrope_interleaved = *interleaved;

  ASSIGN_OR_RETURN(rope.factor, r.OptNumber("factor"));
  ASSIGN_OR_RETURN(rope.original_max_position_embeddings, r.OptInt("original_max_position_embeddings"));
  if (rope.rope_type == "yarn" && (!rope.factor || *rope.factor <= 0))
    return r.Error("factor", "rope_type yarn needs a positive factor");
  return rope;
}

absl::StatusOr<core::DType> ReadDType(const FieldReader& f, const FieldReader* fallback) {
  ASSIGN_OR_RETURN(std::optional<std::string> name, f.OptString("dtype"));
  std::string_view key = "dtype";
  const FieldReader* src = &f;
  if (!name) { ASSIGN_OR_RETURN(name, f.OptString("torch_dtype")); key = "torch_dtype"; }
  if (!name && fallback) {
    src = fallback;
    key = "dtype";
    ASSIGN_OR_RETURN(name, fallback->OptString("dtype"));
    if (!name) { ASSIGN_OR_RETURN(name, fallback->OptString("torch_dtype")); key = "torch_dtype"; }
  }
  if (!name) return core::DType::kBF16;
  if (*name == "bfloat16") return core::DType::kBF16;
  if (*name == "float16") return core::DType::kF16;
  if (*name == "float32") return core::DType::kF32;
  return src->Error(key, fmt::format("unsupported dtype \"{}\" (expected bfloat16, float16 or float32)", *name));
}

absl::Status Validate(const Qwen35Config& c, const FieldReader& text) {
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return text.Error("num_key_value_heads",
                      fmt::format("num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                                  c.num_attention_heads, c.num_key_value_heads));
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    return text.Error("linear_num_value_heads",
                      fmt::format("linear_num_value_heads ({}) is not a multiple of linear_num_key_heads ({})",
                                  c.linear_num_value_heads, c.linear_num_key_heads));
  double rot = static_cast<double>(c.head_dim) * c.rope.partial_rotary_factor;
  int64_t rot_i = static_cast<int64_t>(std::llround(rot));
  if (std::fabs(rot - static_cast<double>(rot_i)) > 1e-9 || rot_i % 2 != 0 || rot_i <= 0)
    return text.Error("partial_rotary_factor",
                      fmt::format("head_dim ({}) * partial_rotary_factor ({}) = {} is not a positive even integer",
                                  c.head_dim, c.rope.partial_rotary_factor, rot));
  // rope.mrope_section is not checked against the rotary dim here: see MropeSectionFor3dPositions.
  if (!(c.rms_norm_eps > 0)) return text.Error("rms_norm_eps", fmt::format("must be positive, got {}", c.rms_norm_eps));
  if (c.max_position_embeddings <= 0)
    return text.Error("max_position_embeddings", fmt::format("must be positive, got {}", c.max_position_embeddings));
  if (c.mtp_num_hidden_layers < 0)
    return text.Error("mtp_num_hidden_layers", fmt::format("must not be negative, got {}", c.mtp_num_hidden_layers));
  for (int32_t id : c.eos_token_ids)
    if (id >= c.vocab_size)
      return text.Error("eos_token_id", fmt::format("token id {} is outside the vocabulary ({})", id, c.vocab_size));
  return absl::OkStatus();
}

}  // namespace

std::string_view LayerTypeName(LayerType t) {
  return t == LayerType::kFullAttention ? "full_attention" : "linear_attention";
}

std::string_view Qwen35Config::weight_prefix() const {
  return layout == CheckpointLayout::kConditionalGeneration ? "model.language_model." : "model.";
}

int64_t Qwen35Config::num_full_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), LayerType::kFullAttention);
}

int64_t Qwen35Config::rotary_dim() const {
  return static_cast<int64_t>(std::llround(static_cast<double>(head_dim) * rope.partial_rotary_factor));
}

absl::StatusOr<std::vector<int64_t>> Qwen35Config::MropeSectionFor3dPositions() const {
  static const std::vector<int64_t> kTransformersDefault = {11, 11, 10};
  const bool absent = rope.mrope_section.empty();
  const std::vector<int64_t>& section = absent ? kTransformersDefault : rope.mrope_section;
  const int64_t pairs = rotary_dim() / 2;
  int64_t sum = 0;
  for (int64_t s : section) sum += s;
  std::string problem;
  if (section.size() != 3) {
    problem = fmt::format("has {} entries; expected 3 (temporal, height, width)", section.size());
  } else if (sum != pairs) {
    problem = fmt::format("{}sums to {} but the rotary dim {} has {} frequency pairs",
                          absent ? "is absent, and transformers' default [11, 11, 10] " : "", sum, rotary_dim(),
                          pairs);
  }
  if (problem.empty()) return section;
  return absl::InvalidArgumentError(
      fmt::format("field '{}' {}: images and video need a 3-D position split that covers the rotary dim "
                  "(text-only input needs none)", rope.mrope_section_field, problem));
}

std::vector<int32_t> Qwen35Config::stop_token_ids() const {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (generation)
    for (int32_t id : generation->eos_token_ids) add(id);
  for (int32_t id : eos_token_ids) add(id);
  return ids;
}

std::string Qwen35Config::LayerPattern() const {
  std::string s;
  for (LayerType t : layer_types) s += t == LayerType::kFullAttention ? 'F' : 'L';
  const size_t n = s.size();
  for (size_t p = 1; p < n; ++p) {
    if (n % p != 0) continue;
    bool periodic = true;
    for (size_t i = p; i < n && periodic; ++i) periodic = s[i] == s[i - p];
    if (periodic) return fmt::format("{} x{}", s.substr(0, p), n / p);
  }
  return s;
}

absl::StatusOr<GenerationConfig> ParseGenerationConfig(const std::string& generation_json,
                                                       const std::string& generation_file) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(generation_json, generation_file));
  FieldReader f(j, generation_file, "");
  GenerationConfig g;
  ASSIGN_OR_RETURN(g.eos_token_ids, f.TokenIds("eos_token_id"));
  ASSIGN_OR_RETURN(g.bos_token_id, f.OptTokenId("bos_token_id"));
  ASSIGN_OR_RETURN(g.pad_token_id, f.OptTokenId("pad_token_id"));
  ASSIGN_OR_RETURN(g.do_sample, f.OptBool("do_sample"));
  ASSIGN_OR_RETURN(g.temperature, f.OptNumber("temperature"));
  if (g.temperature && *g.temperature < 0)
    return f.Error("temperature", fmt::format("must not be negative, got {}", *g.temperature));
  ASSIGN_OR_RETURN(g.top_p, f.OptNumber("top_p"));
  if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1))
    return f.Error("top_p", fmt::format("must be in (0, 1], got {}", *g.top_p));
  ASSIGN_OR_RETURN(g.top_k, f.OptInt("top_k"));
  if (g.top_k && *g.top_k < 0) return f.Error("top_k", fmt::format("must not be negative, got {}", *g.top_k));
  ASSIGN_OR_RETURN(g.min_p, f.OptNumber("min_p"));
  if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1))
    return f.Error("min_p", fmt::format("must be in [0, 1], got {}", *g.min_p));
  ASSIGN_OR_RETURN(g.repetition_penalty, f.OptNumber("repetition_penalty"));
  if (g.repetition_penalty && !(*g.repetition_penalty > 0))
    return f.Error("repetition_penalty", fmt::format("must be positive, got {}", *g.repetition_penalty));
  ASSIGN_OR_RETURN(g.presence_penalty, f.OptNumber("presence_penalty"));
  return g;
}

absl::StatusOr<Qwen35Config> ParseQwen35Config(const std::string& config_json, const std::string& config_file) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(config_json, config_file));
  FieldReader top(j, config_file, "");
  Qwen35Config c;

  ASSIGN_OR_RETURN(std::optional<std::string> model_type, top.OptString("model_type"));
  if (!model_type) return top.Error("model_type", "required field is missing");
  c.model_type = *model_type;
  std::string want_arch;
  if (c.model_type == "qwen3_5") {
    c.layout = CheckpointLayout::kConditionalGeneration;
    want_arch = "Qwen3_5ForConditionalGeneration";
  } else if (c.model_type == "qwen3_5_text") {
    c.layout = CheckpointLayout::kCausalLM;
    want_arch = "Qwen3_5ForCausalLM";
  } else {
    return top.Error("model_type", fmt::format("unsupported model_type \"{}\" (supported: qwen3_5, qwen3_5_text)",
                                               c.model_type));
  }
  c.architecture = want_arch;
  if (const json* archs = top.Find("architectures")) {
    if (!archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string())
      return top.Error("architectures", fmt::format("expected a list of one string, got {}", Preview(*archs)));
    std::string arch = (*archs)[0].get<std::string>();
    if (arch != want_arch)
      return top.Error("architectures",
                       fmt::format("unsupported architecture \"{}\" for model_type \"{}\" (expected \"{}\")", arch,
                                   c.model_type, want_arch));
  }

  // Where the text model's fields live.
  const json* text_obj = &j;
  std::string text_prefix;
  if (c.layout == CheckpointLayout::kConditionalGeneration) {
    text_obj = top.Find("text_config");
    if (!text_obj) return top.Error("text_config", "required field is missing (model_type qwen3_5 nests the text model)");
    if (!text_obj->is_object()) return top.Error("text_config", fmt::format("expected an object, got {}", Preview(*text_obj)));
    text_prefix = "text_config.";
  }
  FieldReader text(*text_obj, config_file, text_prefix);
  const FieldReader* outer = c.layout == CheckpointLayout::kConditionalGeneration ? &top : nullptr;

  ASSIGN_OR_RETURN(c.hidden_size, text.PositiveInt("hidden_size"));
  ASSIGN_OR_RETURN(c.num_hidden_layers, text.PositiveInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.intermediate_size, text.PositiveInt("intermediate_size"));
  ASSIGN_OR_RETURN(c.vocab_size, text.PositiveInt("vocab_size"));
  if (c.vocab_size > INT32_MAX) return text.Error("vocab_size", "too large for 32-bit token ids");
  ASSIGN_OR_RETURN(c.num_attention_heads, text.PositiveInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_key_value_heads, text.PositiveInt("num_key_value_heads"));
  ASSIGN_OR_RETURN(c.head_dim, text.PositiveInt("head_dim"));
  ASSIGN_OR_RETURN(c.linear_num_key_heads, text.PositiveInt("linear_num_key_heads"));
  ASSIGN_OR_RETURN(c.linear_num_value_heads, text.PositiveInt("linear_num_value_heads"));
  ASSIGN_OR_RETURN(c.linear_key_head_dim, text.PositiveInt("linear_key_head_dim"));
  ASSIGN_OR_RETURN(c.linear_value_head_dim, text.PositiveInt("linear_value_head_dim"));
  ASSIGN_OR_RETURN(c.linear_conv_kernel_dim, text.PositiveInt("linear_conv_kernel_dim"));
  ASSIGN_OR_RETURN(c.layer_types, ReadLayerTypes(text, c.num_hidden_layers));

  ASSIGN_OR_RETURN(std::optional<std::string> act, text.OptString("hidden_act"));
  if (act && *act != "silu") return text.Error("hidden_act", fmt::format("unsupported activation \"{}\" (expected silu)", *act));
  ASSIGN_OR_RETURN(std::optional<bool> attention_bias, text.OptBool("attention_bias"));
  if (attention_bias.value_or(false)) return text.Error("attention_bias", "attention biases are not supported");

  ASSIGN_OR_RETURN(std::optional<double> eps, text.OptNumber("rms_norm_eps"));
  if (eps) c.rms_norm_eps = *eps;
  ASSIGN_OR_RETURN(c.rope, ReadRope(text));
  ASSIGN_OR_RETURN(std::optional<bool> gate, text.OptBool("attn_output_gate"));
  if (gate) c.attn_output_gate = *gate;

  // transformers 5 ties by the model's own (top-level) config; fall back to text_config's value.
  ASSIGN_OR_RETURN(std::optional<bool> tie, top.OptBool("tie_word_embeddings"));
  if (!tie && outer) { ASSIGN_OR_RETURN(tie, text.OptBool("tie_word_embeddings")); }
  c.tie_word_embeddings = tie.value_or(false);

  ASSIGN_OR_RETURN(std::optional<int64_t> max_pos, text.OptInt("max_position_embeddings"));
  if (max_pos) c.max_position_embeddings = *max_pos;
  ASSIGN_OR_RETURN(std::optional<int64_t> mtp, text.OptInt("mtp_num_hidden_layers"));
  if (mtp) c.mtp_num_hidden_layers = *mtp;
  ASSIGN_OR_RETURN(c.dtype, ReadDType(text, outer));

  ASSIGN_OR_RETURN(c.eos_token_ids, text.TokenIds("eos_token_id"));
  if (c.eos_token_ids.empty() && outer) { ASSIGN_OR_RETURN(c.eos_token_ids, outer->TokenIds("eos_token_id")); }

  const FieldReader* quant_src = &top;
  const json* quant = top.Find("quantization_config");
  if (!quant && outer) { quant = text.Find("quantization_config"); quant_src = &text; }
  if (quant) {
    if (!quant->is_object())
      return quant_src->Error("quantization_config", fmt::format("expected an object, got {}", Preview(*quant)));
    c.quantization_config_json = quant->dump();
  }

  RETURN_IF_ERROR(Validate(c, text));
  return c;
}

absl::StatusOr<Qwen35Config> LoadQwen35Config(const std::filesystem::path& model_dir) {
  const std::filesystem::path config_path = model_dir / "config.json";
  ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
  ASSIGN_OR_RETURN(Qwen35Config c, ParseQwen35Config(text, config_path.string()));

  const std::filesystem::path gen_path = model_dir / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(gen_path, ec)) {
    ASSIGN_OR_RETURN(std::string gen_text, ReadFile(gen_path));
    ASSIGN_OR_RETURN(GenerationConfig g, ParseGenerationConfig(gen_text, gen_path.string()));
    for (int32_t id : g.eos_token_ids)
      if (id >= c.vocab_size)
        return absl::InvalidArgumentError(fmt::format("{}: field 'eos_token_id': token id {} is outside the vocabulary ({})",
                                                      gen_path.string(), id, c.vocab_size));
    c.generation = std::move(g);
  }
  return c;
}

}  // namespace sparkserve::model
