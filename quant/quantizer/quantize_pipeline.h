// The streaming quantisation pipeline: reads a checkpoint's tensors one at a time from a
// TensorSource (a safetensors directory, or a synthetic random model), applies a Recipe, and writes
// compressed-tensors safetensors shards through a PlannedSafetensorsWriter; peak memory is about one
// f32 copy of the largest tensor per worker thread. Also builds the `quantization_config`.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "quant/quantizer/recipe.h"
#include "quant/quantizer/weight_quantizer.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::quant {

struct SourceTensorInfo {
  std::string name;
  core::DType dtype = core::DType::kBF16;
  core::Shape shape;
};

// Where the pipeline reads unquantised tensors from.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Every tensor, in a stable order.
  virtual std::vector<SourceTensorInfo> List() const = 0;
  // Tensor `name` as stored (its listed dtype and shape); may be a view. Thread-safe.
  virtual absl::StatusOr<core::Tensor> Load(const std::string& name) const = 0;
};

// A safetensors checkpoint directory (model.safetensors or an index with shards), mmap'd.
class SafetensorsTensorSource : public TensorSource {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsTensorSource>> Open(const std::string& dir);
  std::vector<SourceTensorInfo> List() const override;
  absl::StatusOr<core::Tensor> Load(const std::string& name) const override;

 private:
  explicit SafetensorsTensorSource(SafetensorsCheckpoint ckpt) : ckpt_(std::move(ckpt)) {}
  SafetensorsCheckpoint ckpt_;
};

// Calibration results handed to the pipeline (all optional).
struct CalibrationScales {
  // NVFP4 module name -> amax of its input activations; sets `input_global_scale` = 448*6/amax and
  // makes the NVFP4 group W4A4 (used only when every NVFP4 module has one).
  std::map<std::string, float> input_amax;
  // Attention module prefix ("model.layers.3.self_attn") -> {amax(k), amax(v)} after k_norm / RoPE;
  // writes `k_scale` / `v_scale` = amax / 448 and `kv_cache_scheme` (FP8 per tensor).
  std::map<std::string, std::pair<float, float>> kv_amax;
};

struct QuantizeOptions {
  bool tie_word_embeddings = false;    // config: lm_head shares embed_tokens (no lm_head.weight stored)
  std::string text_prefix = "model.";  // "model." or "model.language_model."
  bool search_scales = true;           // NVFP4 per-group scale search (false: round-to-nearest)
  int threads = 0;                     // <= 0: hardware concurrency
  uint64_t max_shard_bytes = 4ull << 30;
  bool progress = true;                // progress bar on stderr
  CalibrationScales calibration;
};

// Per written module (quantised or dense Linear) and per format totals.
struct ModuleReport {
  std::string name;       // module, e.g. "model.layers.0.mlp.up_proj"
  WeightScheme scheme = WeightScheme::kDense;
  std::string fallback;   // why the recipe's scheme could not be used ("" when it was)
  QuantError error;       // zero for dense
};

struct FormatTotals {
  int64_t tensors = 0;  // stored tensors (a NVFP4 module counts its packed weight and scales)
  int64_t modules = 0;  // Linear modules
  uint64_t bytes = 0;
};

struct QuantizeReport {
  std::vector<ModuleReport> modules;            // every Linear module, in source order
  std::map<std::string, FormatTotals> formats;  // "nvfp4" | "fp8" | "bf16" | "f16" | "f32" (dense tensors)
  uint64_t source_bytes = 0, output_bytes = 0;
  size_t shards = 0;
  bool untied_lm_head = false;                  // lm_head written from embed_tokens
  std::string quantization_config_json;         // "" when nothing was quantised
  QuantError nvfp4, fp8;                        // totals over modules of that scheme
};

// Quantises every tensor of `source` per `recipe` into `out_dir` (an existing directory): safetensors
// shards (+ index). Fails on already-quantised input (fp8/u8/int tensors, compressed-tensors names).
absl::StatusOr<QuantizeReport> QuantizeTensors(const TensorSource& source, const Recipe& recipe,
                                               const QuantizeOptions& options, const std::string& out_dir);

// config.json text for the output: `input_config` with `quantization_config` set (removed when the
// report has none) and, when the head was untied, tie_word_embeddings false (top level and
// text_config). Key order is preserved.
absl::StatusOr<std::string> QuantizedConfigJson(const std::string& input_config, const QuantizeReport& report);

// Prints the per-format table (and NVFP4/FP8 error figures) as text.
std::string FormatReportTable(const QuantizeReport& report);

}  // namespace sparkserve::quant
