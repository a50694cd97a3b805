// Simulated NVFP4 activations and FP8 KV cache (see activation_fake_quant.h).
#include "calib/activation_fake_quant.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "fmt/format.h"

namespace sparkserve::calib {

absl::StatusOr<std::unique_ptr<QuantizedActivationSimulator>> QuantizedActivationSimulator::FromCheckpoint(
    const quant::Checkpoint& ckpt) {
  std::map<std::string, float> gs;
  for (const auto& [name, m] : ckpt.modules()) {
    if (!m.input_global_scale.defined()) continue;
    const float v = m.input_global_scale.data<float>()[0];
    if (!(v > 0) || !std::isfinite(v))
      return absl::InvalidArgumentError(fmt::format("{}.input_global_scale is {}", name, v));
    gs[name] = v;
  }
  ASSIGN_OR_RETURN(auto kv, quant::ReadKvScales(ckpt));
  return std::make_unique<QuantizedActivationSimulator>(std::move(gs), std::move(kv));
}

const float* QuantizedActivationSimulator::OnLinearInput(const std::string& module, const float* x, int64_t rows,
                                                         int64_t in) {
  auto it = gs_.find(module);
  if (it == gs_.end() || in % 16 != 0) return x;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<float>& buf = buffers_[module];
  buf.resize(static_cast<size_t>(rows * in));
  quant::FakeQuantizeNvfp4Rows(x, rows, in, it->second, buf.data());
  return buf.data();
}

void QuantizedActivationSimulator::OnKvWrite(const std::string& attention, float* k, float* v, int64_t count) {
  auto it = kv_.find(attention);
  if (it == kv_.end()) return;
  quant::FakeQuantizeFp8(k, count, it->second.first);
  quant::FakeQuantizeFp8(v, count, it->second.second);
}

}  // namespace sparkserve::calib
