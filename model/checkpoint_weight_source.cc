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
  return ModuleOf(name) != nullptr || ckpt_->tensors().count(name) > 0;
}

absl::StatusOr<core::Tensor> CheckpointWeightSource::LoadF32(const std::string& name) const {
  // Each source tensor is read once: its mapped pages are released after the conversion, so the
  // process does not hold the checkpoint's bytes on top of the f32 model.
  const quant::SafetensorsCheckpoint& files = ckpt_->files();
  if (const quant::QuantizedLinear* m = ModuleOf(name)) {
    auto w = m->DequantizeToF32();
    if (!w.ok()) return core::Annotate(w.status(), name);
    for (const core::Tensor* t : {&m->weight, &m->weight_scale, &m->weight_global_scale, &m->input_global_scale,
                                  &m->input_scale, &m->bias}) {
      files.ReleasePages(*t);
    }
    return w;
  }
  auto t = ckpt_->DenseF32(name);
  if (!t.ok()) return core::Annotate(t.status(), name);
  if (auto view = ckpt_->Tensor(name); view.ok()) files.ReleasePages(*view);
  return t;
}

}  // namespace sparkserve::model
