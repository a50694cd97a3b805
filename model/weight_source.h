// WeightSource: where the model binding reads its parameters from, as dense f32 tensors by their
// checkpoint name ("model.layers.0.mlp.up_proj.weight"). The quant layer's Checkpoint backs it
// (dequantising NVFP4/FP8 linears at load); tests may back it with in-memory tensors.
#pragma once
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace sparkserve::model {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Whether the checkpoint holds parameter `name` (dense, or as a quantised linear's parts).
  virtual bool Has(const std::string& name) const = 0;
  // The full (unsharded) parameter as a CPU f32 tensor of its checkpoint shape. NotFound when absent.
  virtual absl::StatusOr<core::Tensor> LoadF32(const std::string& name) const = 0;
};

// In-memory weights (tests, synthetic models).
class MapWeightSource : public WeightSource {
 public:
  explicit MapWeightSource(std::map<std::string, core::Tensor> tensors) : tensors_(std::move(tensors)) {}
  bool Has(const std::string& name) const override { return tensors_.count(name) > 0; }
  absl::StatusOr<core::Tensor> LoadF32(const std::string& name) const override;

 private:
  std::map<std::string, core::Tensor> tensors_;
};

}  // namespace sparkserve::model
