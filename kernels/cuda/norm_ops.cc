// Row-wise ops around the linears: argument checks around the kernels of norm_ops.cu.
#include "kernels/cuda/norm_ops.h"

#include <cmath>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/norm_ops_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

absl::Status CheckPointer(const void* p, const char* op, const char* name) {
  if (p == nullptr) return absl::InvalidArgumentError(fmt::format("{}: {} is null", op, name));
  return absl::OkStatus();
}

absl::Status CheckNormArgs(const char* op, const float* x, const float* w, int rows, int dim, float eps,
                           const float* out_f32, const __half* out_f16) {
  if (rows < 0) return absl::InvalidArgumentError(fmt::format("{}: rows must be >= 0, got {}", op, rows));
  if (dim < 1 || dim > kMaxNormDim) {
    return absl::InvalidArgumentError(fmt::format("{}: dim must be in [1, {}], got {}", op, kMaxNormDim, dim));
  }
  if (!(eps >= 0.f) || !std::isfinite(eps)) {
    return absl::InvalidArgumentError(fmt::format("{}: eps must be finite and >= 0, got {}", op, eps));
  }
  if (out_f32 == nullptr && out_f16 == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: out_f32 and out_f16 are both null (nothing to write)", op));
  }
  RETURN_IF_ERROR(CheckPointer(x, op, "x"));
  return CheckPointer(w, op, "w");
}

}  // namespace

absl::Status EmbeddingGather(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int n,
                             float* out, cudaStream_t stream) {
  constexpr const char* kOp = "EmbeddingGather";
  if (vocab < 1) return absl::InvalidArgumentError(fmt::format("{}: vocab must be >= 1, got {}", kOp, vocab));
  if (dim < 1) return absl::InvalidArgumentError(fmt::format("{}: dim must be >= 1, got {}", kOp, dim));
  if (n < 0) return absl::InvalidArgumentError(fmt::format("{}: n must be >= 0, got {}", kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointer(table, kOp, "table"));
  RETURN_IF_ERROR(CheckPointer(ids, kOp, "ids"));
  RETURN_IF_ERROR(CheckPointer(out, kOp, "out"));
  return CudaStatus(LaunchEmbeddingGather(table, vocab, dim, ids, n, out, stream), kOp);
}

absl::Status RmsNormZeroCentered(const float* x, const float* w, int rows, int dim, float eps, float* out_f32,
                                 __half* out_f16, cudaStream_t stream) {
  constexpr const char* kOp = "RmsNormZeroCentered";
  RETURN_IF_ERROR(CheckNormArgs(kOp, x, w, rows, dim, eps, out_f32, out_f16));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      LaunchRmsNormZeroCentered(x, nullptr, nullptr, w, rows, dim, eps, out_f32, out_f16, stream), kOp);
}

absl::Status AddRmsNormZeroCentered(float* residual, const float* delta, const float* w, int rows, int dim,
                                    float eps, float* out_f32, __half* out_f16, cudaStream_t stream) {
  constexpr const char* kOp = "AddRmsNormZeroCentered";
  RETURN_IF_ERROR(CheckNormArgs(kOp, residual, w, rows, dim, eps, out_f32, out_f16));
  RETURN_IF_ERROR(CheckPointer(delta, kOp, "delta"));
  if (rows == 0) return absl::OkStatus();
  return CudaStatus(
      LaunchRmsNormZeroCentered(residual, delta, residual, w, rows, dim, eps, out_f32, out_f16, stream), kOp);
}

absl::Status GatherRows(const float* x, int dim, const int32_t* rows_idx, int n, float* out, cudaStream_t stream) {
  constexpr const char* kOp = "GatherRows";
  if (dim < 1) return absl::InvalidArgumentError(fmt::format("{}: dim must be >= 1, got {}", kOp, dim));
  if (n < 0) return absl::InvalidArgumentError(fmt::format("{}: n must be >= 0, got {}", kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointer(x, kOp, "x"));
  RETURN_IF_ERROR(CheckPointer(rows_idx, kOp, "rows_idx"));
  RETURN_IF_ERROR(CheckPointer(out, kOp, "out"));
  return CudaStatus(LaunchGatherRows(x, dim, rows_idx, n, out, stream), kOp);
}

absl::Status SwiGlu(const float* gate, const float* up, int rows, int cols, int ld, __half* out,
                    cudaStream_t stream) {
  constexpr const char* kOp = "SwiGlu";
  if (rows < 0) return absl::InvalidArgumentError(fmt::format("{}: rows must be >= 0, got {}", kOp, rows));
  if (cols < 1) return absl::InvalidArgumentError(fmt::format("{}: cols must be >= 1, got {}", kOp, cols));
  if (ld < cols) return absl::InvalidArgumentError(fmt::format("{}: ld {} is less than cols {}", kOp, ld, cols));
  if (rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointer(gate, kOp, "gate"));
  RETURN_IF_ERROR(CheckPointer(up, kOp, "up"));
  RETURN_IF_ERROR(CheckPointer(out, kOp, "out"));
  return CudaStatus(LaunchSwiGlu(gate, up, rows, cols, ld, out, stream), kOp);
}

absl::Status F32ToF16(const float* x, int64_t n, __half* out, cudaStream_t stream) {
  constexpr const char* kOp = "F32ToF16";
  if (n < 0) return absl::InvalidArgumentError(fmt::format("{}: n must be >= 0, got {}", kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointer(x, kOp, "x"));
  RETURN_IF_ERROR(CheckPointer(out, kOp, "out"));
  return CudaStatus(LaunchF32ToF16(x, n, out, stream), kOp);
}

absl::Status AddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  constexpr const char* kOp = "AddInPlace";
  if (n < 0) return absl::InvalidArgumentError(fmt::format("{}: n must be >= 0, got {}", kOp, n));
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPointer(x, kOp, "x"));
  RETURN_IF_ERROR(CheckPointer(y, kOp, "y"));
  return CudaStatus(LaunchAddInPlace(x, y, n, stream), kOp);
}

}  // namespace sparkserve::kernels::cuda
