// Checkpoint: a model's weights seen as its weight-bearing modules — every Linear/Embedding, each a
// validated QuantizedLinear in NVFP4, FP8 or dense form — plus every other tensor (norms, conv1d,
// A_log, dt_bias, k/v scales) by name. Read from a model directory (config.json + safetensors,
// single or sharded, mmap'd), or built from tensors in memory (one tensor-parallel rank's shard:
// quant/shard_cut.h cuts it, a node rebuilds it from its cache).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "quant/compressed_tensors.h"
#include "quant/quantized_linear.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::quant {

class Checkpoint {
 public:
  // Opens `dir`. A module is the prefix P of a 2-D `P.weight` or of `P.weight_packed`; its format
  // comes from the tensors present, cross-checked against the quantization_config group that targets
  // it (an untargeted or ignored module must be dense). Errors name the module and what is wrong:
  // an unsupported format (int-quantized, pack-quantized, marlin-24, mxfp4, ...), dtypes or shapes
  // that do not fit the format, scales without a weight, a tensor format that contradicts the config.
  static absl::StatusOr<Checkpoint> Open(const std::string& dir);
  // The same module discovery and checks over `tensors` (name -> tensor, e.g. views of another
  // checkpoint or cached blobs), quantized as `qconfig` says. `label` names it in errors;
  // `backing` is the files some of the tensors are views of, if any (files()).
  static absl::StatusOr<Checkpoint> FromTensors(std::map<std::string, core::Tensor, std::less<>> tensors,
                                                std::optional<QuantizationConfig> qconfig, std::string label,
                                                SafetensorsCheckpoint backing = {});

  // The model directory, or FromTensors' label.
  const std::string& dir() const { return dir_; }
  // nullopt for an unquantized checkpoint (config.json without quantization_config).
  const std::optional<QuantizationConfig>& quantization_config() const { return qconfig_; }
  // Weight-bearing modules by module name (e.g. "model.layers.0.mlp.down_proj", "model.embed_tokens").
  using ModuleMap = std::map<std::string, QuantizedLinear, std::less<>>;
  const ModuleMap& modules() const { return modules_; }
  const QuantizedLinear* FindModule(std::string_view name) const;
  // Names of the tensors that belong to no module, sorted.
  const std::vector<std::string>& other_tensors() const { return others_; }
  // Any tensor by its full name, as stored (zero-copy view).
  absl::StatusOr<core::Tensor> Tensor(std::string_view name) const;
  // Every tensor by name (views).
  const std::map<std::string, core::Tensor, std::less<>>& tensors() const { return tensors_; }
  // A non-module tensor (f32/bf16/f16) widened to a new f32 tensor.
  absl::StatusOr<core::Tensor> DenseF32(std::string_view name) const;
  // The safetensors files behind the tensors: an Open()ed checkpoint's, a cut's parent's (they may
  // hold names that are not this checkpoint's: ask tensors() what it has), or none.
  const SafetensorsCheckpoint& files() const { return files_; }

 private:
  // Groups tensors_ into modules and other tensors, checking them against qconfig_.
  absl::Status Build();
  // Where a tensor came from, for errors: its file, or the label.
  std::string SourceOf(std::string_view name) const;

  std::string dir_;
  std::optional<QuantizationConfig> qconfig_;
  SafetensorsCheckpoint files_;
  std::map<std::string, core::Tensor, std::less<>> tensors_;
  ModuleMap modules_;
  std::vector<std::string> others_;
};

}  // namespace sparkserve::quant
