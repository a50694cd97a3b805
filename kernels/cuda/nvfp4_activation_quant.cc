// NVFP4 activation quantisation: argument checks around the kernels of nvfp4_activation_quant.cu.
#include "kernels/cuda/nvfp4_activation_quant.h"

#include <cmath>
#include <cstdint>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/nvfp4_activation_quant_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

absl::Status CheckArgs(const void* x, int rows, int in, float gs, const Nvfp4Activations& out) {
  constexpr const char* kOp = "QuantizeActivationsNvfp4";
  if (rows < 0) return absl::InvalidArgumentError(fmt::format("{}: rows must be >= 0, got {}", kOp, rows));
  if (in < 16 || in % 16 != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: in must be a positive multiple of 16, got {}", kOp, in));
  }
  if (!(gs > 0.f) || !std::isfinite(gs)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: input_global_scale must be finite and > 0, got {}", kOp, gs));
  }
  if (rows > 0 && (x == nullptr || out.codes == nullptr || out.scales == nullptr)) {
    return absl::InvalidArgumentError(fmt::format("{}: x, codes and scales must be non-null", kOp));
  }
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(out.codes) % 8 != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: x must be 16-byte and codes 8-byte aligned", kOp));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status QuantizeActivationsNvfp4(const __half* x, int rows, int in, float input_global_scale,
                                      const Nvfp4Activations& out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckArgs(x, rows, in, input_global_scale, out));
  return CudaStatus(
      LaunchQuantizeActivationsNvfp4(x, static_cast<int64_t>(rows) * in / 16, input_global_scale, out, stream),
      "QuantizeActivationsNvfp4 (f16)");
}

absl::Status QuantizeActivationsNvfp4(const float* x, int rows, int in, float input_global_scale,
                                      const Nvfp4Activations& out, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckArgs(x, rows, in, input_global_scale, out));
  return CudaStatus(
      LaunchQuantizeActivationsNvfp4(x, static_cast<int64_t>(rows) * in / 16, input_global_scale, out, stream),
      "QuantizeActivationsNvfp4 (f32)");
}

}  // namespace sparkserve::kernels::cuda
