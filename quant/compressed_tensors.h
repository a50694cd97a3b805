// The `quantization_config` of a compressed-tensors checkpoint (config.json): config groups with
// their targets and quantization args, the global and per-group formats, `ignore`, and
// `kv_cache_scheme`; plus which group applies to a module, decided exactly as the library's
// apply_quantization_config does (compressed_tensors/quantization/lifecycle/apply.py, utils/match.py).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::quant {

// compressed-tensors format names (CompressionFormat values).
inline constexpr std::string_view kFormatDense = "dense";
inline constexpr std::string_view kFormatNvfp4 = "nvfp4-pack-quantized";
inline constexpr std::string_view kFormatFloatQuantized = "float-quantized";
inline constexpr std::string_view kFormatNaiveQuantized = "naive-quantized";
inline constexpr std::string_view kFormatMixedPrecision = "mixed-precision";

// QuantizationArgs: how one of weights / input activations / the KV cache is quantized.
struct QuantArgs {
  int num_bits = 8;
  std::string type = "int";        // "int" | "float"
  bool symmetric = true;
  std::optional<int> group_size;   // -1 means per channel
  std::string strategy;            // tensor|channel|group|block|token|tensor_group|attn_head (inferred when absent)
  std::vector<int> block_structure;  // [rows, cols] for strategy "block"
  std::string dynamic = "false";   // "false" | "true" | "local"
  std::string scale_dtype;         // torch dtype name without "torch.", e.g. "float8_e4m3fn" ("" when absent)

  bool is_float(int bits) const { return type == "float" && num_bits == bits; }
};

// One entry of `config_groups`.
struct QuantScheme {
  std::string name;                  // the config_groups key, e.g. "group_0"
  std::vector<std::string> targets;  // exact module names, class names ("Linear") or "re:" regexes
  std::optional<QuantArgs> weights;
  std::optional<QuantArgs> input_activations;
  std::optional<QuantArgs> output_activations;
  std::string format;                // the group's own format ("" when absent)
};

class TargetMatcher;  // compiled "re:" patterns

struct QuantizationConfig {
  std::string quant_method;          // always "compressed-tensors" once parsed
  std::string format;                // global format ("" when absent)
  std::string quantization_status;   // e.g. "compressed"
  std::vector<QuantScheme> groups;   // in config order
  std::vector<std::string> ignore;   // names, class names or "re:" regexes
  std::optional<QuantArgs> kv_cache_scheme;

  // The group that applies to module `name` of class `class_name` ("Linear", "Embedding"), or null
  // when the module is ignored or no target matches. As the library: a module must match some
  // target and no `ignore` entry (by exact name, `re:` pattern with Python re.match semantics, i.e.
  // anchored at the start only, or class name); among the matching targets, exact names come first,
  // then regexes (each sorted as strings), then class names; the first one's group wins (a target
  // listed by two groups belongs to the later group).
  const QuantScheme* SchemeFor(std::string_view name, std::string_view class_name) const;

  // The compression format of modules under `scheme`: its own format, else the global one (unless
  // "mixed-precision" or absent), else inferred from its args as the library's infer_module_format.
  std::string FormatFor(const QuantScheme& scheme) const;

  std::shared_ptr<const TargetMatcher> matcher;  // set by the parser
};

// Parses the `quantization_config` object given as JSON text; `source` names it in errors
// (e.g. "model/config.json"). Fails on a quant_method other than "compressed-tensors", malformed
// groups/args, invalid regexes, or args the library itself rejects.
absl::StatusOr<QuantizationConfig> ParseQuantizationConfig(std::string_view json_text, std::string_view source);

// Reads config.json at `path`: nullopt when it has no quantization_config (an unquantized model).
absl::StatusOr<std::optional<QuantizationConfig>> ReadQuantizationConfig(const std::string& path);

}  // namespace sparkserve::quant
