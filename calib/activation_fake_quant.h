// QuantizedActivationSimulator: an ActivationObserver that runs a compressed-tensors checkpoint's
// activations the way a W4A4 engine does, for evaluation on the CPU model: the input of every NVFP4
// module with an `input_global_scale` is NVFP4-quantised and dequantised (per 16-element group, as
// the compressed-tensors library's tensor_group QDQ does), and K/V are rounded through FP8 with the
// checkpoint's `k_scale` / `v_scale`.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/activation_observer.h"
#include "quant/activation_quant.h"
#include "quant/checkpoint.h"

namespace sparkserve::calib {

class QuantizedActivationSimulator final : public model::ActivationObserver {
 public:
  // module -> input_global_scale; attention module -> {k_scale, v_scale}.
  QuantizedActivationSimulator(std::map<std::string, float> input_global_scale,
                               std::map<std::string, std::pair<float, float>> kv_scale)
      : gs_(std::move(input_global_scale)), kv_(std::move(kv_scale)) {}
  // The scales a checkpoint stores (modules with input_global_scale, `P.k_scale` / `P.v_scale`).
  static absl::StatusOr<std::unique_ptr<QuantizedActivationSimulator>> FromCheckpoint(const quant::Checkpoint& ckpt);

  const float* OnLinearInput(const std::string& module, const float* x, int64_t rows, int64_t in) override;
  void OnKvWrite(const std::string& attention, float* k, float* v, int64_t count) override;

  size_t num_quantised_inputs() const { return gs_.size(); }
  size_t num_kv() const { return kv_.size(); }

 private:
  std::map<std::string, float> gs_;
  std::map<std::string, std::pair<float, float>> kv_;
  std::mutex mu_;
  std::map<std::string, std::vector<float>> buffers_;  // per module: its last quantised input
};

}  // namespace sparkserve::calib
