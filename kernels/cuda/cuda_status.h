// CUDA error checking that turns runtime errors into absl::Status (host code of the CUDA layer).
#pragma once
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace sparkserve::kernels::cuda {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

}  // namespace sparkserve::kernels::cuda

// Returns the CUDA error of `expr` as an absl::Status from the enclosing function.
#define CUDA_RETURN_IF_ERROR(expr) RETURN_IF_ERROR(::sparkserve::kernels::cuda::CudaStatus((expr), #expr))
// Checks the last kernel launch.
#define CUDA_RETURN_IF_LAUNCH_ERROR(what) \
  RETURN_IF_ERROR(::sparkserve::kernels::cuda::CudaStatus(cudaGetLastError(), what))
