// CheckpointWeightSource over quant::Checkpoint.
#include "model/checkpoint_weight_source.h"

#include "core/status.h"

namespace sparkserve::model {

absl::StatusOr<CheckpointWeightSource> CheckpointWeightSource::Open(const std::string& model_dir) {
  ASSIGN_OR_RETURN(quant::Checkpoint ckpt, quant::Checkpoint::Open(model_dir));
  return CheckpointWeightSource(std::make_shared<quant::Checkpoint>(std::move(ckpt)));
}

const quant::QuantizedLinear* CheckpointWeightSource::ModuleOf(const std::string& name) const {
  constexpr std::string_view kSuffix = ".weight";
  if (name.size() <= kSuffix.size() || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return nullptr;
  }
  return ckpt_->FindModule(std::string_view(name).substr(0, name.size() - kSuffix.size()));
}

bool CheckpointWeightSource::Has(const std::string& name) const {
  return ModuleOf(name) != nullptr || ckpt_->files().Contains(name);
}

absl::StatusOr<core::Tensor> CheckpointWeightSource::LoadF32(const std::string& name) const {
  if (const quant::QuantizedLinear* m = ModuleOf(name)) {
    auto w = m->DequantizeToF32();
    if (!w.ok()) return core::Annotate(w.status(), name);
    return w;
  }
  auto t = ckpt_->DenseF32(name);
  if (!t.ok()) return core::Annotate(t.status(), name);
  return t;
}

}  // namespace sparkserve::model
