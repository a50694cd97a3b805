// Dense bf16 linear: argument checks around the kernels of dense_linear.cu.
#include "kernels/cuda/dense_linear.h"

#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/dense_linear_kernels.h"

namespace sparkserve::kernels::cuda {

absl::Status DenseLinearBf16(const __nv_bfloat16* w, int out, int in, const __half* x, int rows, float* y,
                             cudaStream_t stream) {
  if (out < 1 || in < 1) {
    return absl::InvalidArgumentError(fmt::format("DenseLinearBf16: weight shape [{}, {}] must be positive", out, in));
  }
  if (rows < 1 || rows > kDenseMaxRows) {
    return absl::InvalidArgumentError(fmt::format("DenseLinearBf16: rows must be in [1, {}], got {}", kDenseMaxRows, rows));
  }
  if (w == nullptr || x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(fmt::format("DenseLinearBf16: null pointer (w {}, x {}, y {})",
                                                  static_cast<const void*>(w), static_cast<const void*>(x),
                                                  static_cast<const void*>(y)));
  }
  return CudaStatus(LaunchDenseLinearBf16(w, out, in, x, rows, y, stream), "DenseLinearBf16");
}

}  // namespace sparkserve::kernels::cuda
