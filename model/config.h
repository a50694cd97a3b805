// Qwen35Config: the Qwen3.5 text model's configuration, parsed and validated from a checkpoint
// directory's config.json (both layouts, FORMATS.md §1) and optional generation_config.json.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace sparkserve::model {

// The token mixer of one decoder layer.
enum class LayerType : uint8_t {
  kLinearAttention,  // Gated DeltaNet (`linear_attn.*` weights), config name "linear_attention"
  kFullAttention,    // gated softmax attention (`self_attn.*` weights), config name "full_attention"
};
std::string_view LayerTypeName(LayerType t);  // "linear_attention" / "full_attention"

// How the checkpoint wraps the text model (decides where the fields and the weights live).
enum class CheckpointLayout : uint8_t {
  // model_type "qwen3_5", architectures ["Qwen3_5ForConditionalGeneration"]: text fields nested
  // under `text_config`; weights `model.language_model.*`, `lm_head.weight`, `model.visual.*`, `mtp.*`.
  kConditionalGeneration,
  // model_type "qwen3_5_text", architectures ["Qwen3_5ForCausalLM"]: flat; weights `model.*`,
  // `lm_head.weight`, `mtp.*`.
  kCausalLM,
};

// Rotary position embedding. Read from `rope_parameters` (transformers 5) or the legacy
// `rope_scaling` dict (which wins when both are present, as in transformers), with `rope_theta` and
// `partial_rotary_factor` also accepted at the (text) config's top level; values inside the dict win.
struct RopeConfig {
  std::string rope_type = "default";   // "default" or "yarn" (`rope_type`, legacy key `type`)
  double theta = 10000.0;              // `rope_theta`; default is transformers' default_theta
  double partial_rotary_factor = 0.25; // fraction of head_dim rotated (4B: 0.25 -> rotary dim 64)
  // MRoPE: rotary frequency pairs given to the temporal / height / width position components, as
  // the config gives them (`mrope_section`; empty when absent, as transformers writes it for a
  // caller that sets none). For text-only positions the three components are equal, so any section
  // is plain partial RoPE, even one that does not fit the rotary dim (transformers' interleaved
  // split then truncates): a config is never refused for it. Only images and video need a split
  // that fits: Qwen35Config::MropeSectionFor3dPositions().
  std::vector<int64_t> mrope_section;
  std::string mrope_section_field = "rope_parameters.mrope_section";  // where it is read (for errors)
  bool mrope_interleaved = true;       // sections interleaved over the pairs (always so in Qwen3.5)
  std::optional<double> factor;        // yarn only: context extension factor
  std::optional<int64_t> original_max_position_embeddings;  // yarn only
};

// Sampling defaults and stop tokens from generation_config.json. Every field is optional: absent or
// null means "not given" (the request or the server's own default applies).
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;     // `eos_token_id`, int or list; empty when absent
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> pad_token_id;
  std::optional<bool> do_sample;          // false means greedy
  std::optional<double> temperature;      // >= 0
  std::optional<double> top_p;            // in (0, 1]
  std::optional<int64_t> top_k;           // >= 0 (0 disables)
  std::optional<double> min_p;            // in [0, 1]
  std::optional<double> repetition_penalty;  // > 0 (1 = off)
  std::optional<double> presence_penalty;    // any (0 = off)
};

struct Qwen35Config {
  CheckpointLayout layout = CheckpointLayout::kCausalLM;
  std::string model_type;    // "qwen3_5" or "qwen3_5_text" (the top-level model_type)
  std::string architecture;  // "Qwen3_5ForConditionalGeneration" or "Qwen3_5ForCausalLM"

  // ---- shapes (all required: a checkpoint without them is refused, never guessed) ----
  int64_t hidden_size = 0;          // d: residual width (4B: 2560)
  int64_t num_hidden_layers = 0;    // L: decoder layers (4B: 32)
  int64_t intermediate_size = 0;    // SwiGLU width: gate/up [ffn, d], down [d, ffn] (4B: 9216)
  int64_t vocab_size = 0;           // embed_tokens [vocab, d], lm_head [vocab, d] (4B: 248320)
  // Gated attention (full_attention layers): q_proj [2 * heads * head_dim, d] (q and gate per
  // head), k_proj/v_proj [kv_heads * head_dim, d], o_proj [d, heads * head_dim],
  // q_norm/k_norm [head_dim].
  int64_t num_attention_heads = 0;  // query heads (4B: 16); a multiple of num_key_value_heads
  int64_t num_key_value_heads = 0;  // KV heads (4B: 4)
  int64_t head_dim = 0;             // per head (4B: 256)
  // Gated DeltaNet (linear_attention layers): in_proj_qkv [2 * nk * dk + nv * dv, d],
  // in_proj_z [nv * dv, d], in_proj_a/in_proj_b [nv, d], conv1d [2 * nk * dk + nv * dv, 1, kernel],
  // A_log/dt_bias [nv], norm [dv], out_proj [d, nv * dv].
  int64_t linear_num_key_heads = 0;    // nk (4B: 16)
  int64_t linear_num_value_heads = 0;  // nv (4B: 32); a multiple of nk (value head j uses key head j / (nv / nk))
  int64_t linear_key_head_dim = 0;     // dk (4B: 128)
  int64_t linear_value_head_dim = 0;   // dv (4B: 128)
  int64_t linear_conv_kernel_dim = 0;  // causal depthwise conv kernel (4B: 4)

  // Per layer, size num_hidden_layers: `layer_types` ("linear_attention" / "full_attention"; the
  // legacy names "mamba" / "attention" are mapped as transformers does) or, when absent, derived
  // from `full_attention_interval` (default 4): layer i is full attention iff (i + 1) % interval == 0.
  std::vector<LayerType> layer_types;

  // ---- optional fields, with their defaults ----
  double rms_norm_eps = 1e-6;           // `rms_norm_eps`
  RopeConfig rope;                      // see RopeConfig
  bool attn_output_gate = true;         // `attn_output_gate`: output * sigmoid(gate) (Qwen3.5: always)
  // lm_head shares embed_tokens. transformers 5 reads the top-level `tie_word_embeddings` (default
  // false); when only `text_config` has it (transformers 4 read that one), it is used. Top wins.
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 32768;  // `max_position_embeddings` (4B: 262144)
  int64_t mtp_num_hidden_layers = 0;        // MTP draft layers (`mtp.*` weights; 4B: 1)
  core::DType dtype = core::DType::kBF16;   // `dtype` / legacy `torch_dtype`: bfloat16|float16|float32
  std::vector<int32_t> eos_token_ids;       // config.json `eos_token_id` (int or list); may be empty
  // `quantization_config` serialised as compact JSON for the quant layer; empty when absent.
  std::string quantization_config_json;

  // generation_config.json; nullopt when the file is absent.
  std::optional<GenerationConfig> generation;

  // Weight name prefix of the text model: "model.language_model." or "model.".
  std::string_view weight_prefix() const;
  bool is_full_attention(int64_t layer) const {  // layer in [0, num_hidden_layers)
    return layer_types.at(static_cast<size_t>(layer)) == LayerType::kFullAttention;
  }
  int64_t num_full_attention_layers() const;
  // Dimensions rotated per attention head: head_dim * partial_rotary_factor (4B: 64).
  int64_t rotary_dim() const;
  // The MRoPE split 3-D (image / video) positions need: rope.mrope_section, or transformers'
  // fallback [11, 11, 10] when the config has none. InvalidArgument naming the field when it does
  // not have three entries summing to rotary_dim() / 2 (the config still serves text).
  absl::StatusOr<std::vector<int64_t>> MropeSectionFor3dPositions() const;
  // Ids that end generation: generation_config.json's eos list, then config.json's, without
  // duplicates (FORMATS.md §1: <|im_end|> and <|endoftext|> for Qwen3.5). May be empty.
  std::vector<int32_t> stop_token_ids() const;
  // The layer pattern, L = linear_attention, F = full_attention, folded by its shortest period:
  // "LLLF x8" for the 4B; unfolded ("FFL") when it does not repeat.
  std::string LayerPattern() const;
};

// Reads MODEL_DIR/config.json and, when present, MODEL_DIR/generation_config.json. Errors name the
// file and the field: NotFound (no config.json), InvalidArgument (bad JSON, unsupported model_type
// or architecture, missing required field, wrong type, inconsistent shapes).
absl::StatusOr<Qwen35Config> LoadQwen35Config(const std::filesystem::path& model_dir);

// The same from text. `config_file` / `generation_file` name the sources in error messages.
absl::StatusOr<Qwen35Config> ParseQwen35Config(const std::string& config_json,
                                               const std::string& config_file = "config.json");
absl::StatusOr<GenerationConfig> ParseGenerationConfig(
    const std::string& generation_json,
    const std::string& generation_file = "generation_config.json");

}  // namespace sparkserve::model
