// CheckpointWeightSource: a WeightSource over a model directory's checkpoint read by the quant
// layer (dense f32/bf16/f16, or compressed-tensors NVFP4 / FP8 / mixed): linear modules are
// dequantised to f32 (QuantizedLinear::DequantizeToF32), other tensors widened to f32.
#pragma once
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/weight_source.h"
#include "quant/checkpoint.h"

namespace sparkserve::model {

class CheckpointWeightSource : public WeightSource {
 public:
  static absl::StatusOr<CheckpointWeightSource> Open(const std::string& model_dir);
  // Over a checkpoint in hand (e.g. one rank's shard, model/shard_cuts.h).
  explicit CheckpointWeightSource(quant::Checkpoint ckpt)
      : ckpt_(std::make_shared<quant::Checkpoint>(std::move(ckpt))) {}
  bool Has(const std::string& name) const override;
  absl::StatusOr<core::Tensor> LoadF32(const std::string& name) const override;
  const quant::Checkpoint& checkpoint() const { return *ckpt_; }

 private:
  explicit CheckpointWeightSource(std::shared_ptr<quant::Checkpoint> ckpt) : ckpt_(std::move(ckpt)) {}
  // The module whose weight `name` ("P.weight") is, or null.
  const quant::QuantizedLinear* ModuleOf(const std::string& name) const;
  std::shared_ptr<quant::Checkpoint> ckpt_;
};

}  // namespace sparkserve::model
