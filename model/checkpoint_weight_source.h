// CheckpointWeightSource: a WeightSource over a model directory's safetensors checkpoint
// (dense f32/bf16/f16 tensors widened to f32).
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "model/weight_source.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::model {

class CheckpointWeightSource : public WeightSource {
 public:
  static absl::StatusOr<CheckpointWeightSource> Open(const std::string& model_dir);
  bool Has(const std::string& name) const override;
  absl::StatusOr<core::Tensor> LoadF32(const std::string& name) const override;

 private:
  explicit CheckpointWeightSource(quant::SafetensorsCheckpoint ckpt) : ckpt_(std::move(ckpt)) {}
  quant::SafetensorsCheckpoint ckpt_;
};

}  // namespace sparkserve::model
