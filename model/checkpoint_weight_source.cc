// CheckpointWeightSource over quant's safetensors reader.
#include "model/checkpoint_weight_source.h"

#include "core/status.h"

namespace sparkserve::model {

absl::StatusOr<CheckpointWeightSource> CheckpointWeightSource::Open(const std::string& model_dir) {
  ASSIGN_OR_RETURN(quant::SafetensorsCheckpoint ckpt, quant::SafetensorsCheckpoint::Open(model_dir));
  return CheckpointWeightSource(std::move(ckpt));
}

bool CheckpointWeightSource::Has(const std::string& name) const { return ckpt_.Contains(name); }

absl::StatusOr<core::Tensor> CheckpointWeightSource::LoadF32(const std::string& name) const {
  ASSIGN_OR_RETURN(core::Tensor t, ckpt_.Get(name));
  auto f = core::ToF32(t);
  if (!f.ok()) return core::Annotate(f.status(), name);
  return f;
}

}  // namespace sparkserve::model
