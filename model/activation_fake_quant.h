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
#include "quant/checkpoint.h"

namespace sparkserve::model {

// NVFP4 QDQ of x [rows, in] (in a multiple of 16) with global scale `gs` (the stored divisor):
// per group s = fp8(clamp(gs * amax16 / 6, +-448)) (0 -> 0.125, the library's fp8 eps),
// e = s / gs, out = e2m1(clamp(x / e, +-6)) * e. `out` may alias `x`. NaN inputs do not enter amax
// and quantise to +0; +-inf saturate (amax inf -> s = 448, the element -> +-6).
void FakeQuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, float* out);
// The same quantisation keeping what a W4A4 kernel consumes: codes [rows, in/2] (E2M1, element 2j
// the low nibble of byte j) and scales [rows, in/16] (float8_e4m3fn s, the 0 -> 0.125 substitution
// included), so that FakeQuantizeNvfp4Rows(x) == e2m1(code) * (s / gs) bit for bit.
void QuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, uint8_t* codes, uint8_t* scales);
// FP8 KV QDQ in place: x = fp8(x / scale) * scale (saturating at +-448).
void FakeQuantizeFp8(float* x, int64_t count, float scale);

// The FP8 KV-cache scales a checkpoint stores: attention module ("model.layers.3.self_attn") ->
// {k_scale, v_scale} (per tensor, positive and finite, else an error naming the module).
absl::StatusOr<std::map<std::string, std::pair<float, float>>> ReadKvScales(const quant::Checkpoint& ckpt);

class QuantizedActivationSimulator final : public ActivationObserver {
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

}  // namespace sparkserve::model
