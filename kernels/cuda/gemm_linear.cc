// GEMM linear layers: argument checks and workspace sizing around the kernels of gemm_linear.cu.
#include "kernels/cuda/gemm_linear.h"

#include <algorithm>
#include <cstdint>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_linear_kernels.h"

namespace sparkserve::kernels::cuda {

size_t GemmLinearWorkspaceBytes(int out, int in, int rows) {
  if (out < 1 || in < kGemmStageK || rows < 1) return 0;
  // num_splits * r is not monotone in r (splits drop as blocks grow), so take the most over 1..rows
  // and over every kernel a call may force. Past 64 rows the block shape is fixed and the block
  // count only grows, so once there are enough blocks not to split, no larger r splits.
  int64_t most = 0;
  for (const GemmKernel kernel : {GemmKernel::kMma, GemmKernel::kWgmma}) {
    if (kernel == GemmKernel::kWgmma && !DeviceRunsWgmma()) continue;
    for (int r = 1; r <= rows; ++r) {
      const GemmPlan p = PlanGemm(r, out, in, kernel);
      most = std::max<int64_t>(most, static_cast<int64_t>(p.num_splits) * r);
      if (r > 64 && !p.few_blocks) {
        most = std::max<int64_t>(most, rows);
        break;
      }
    }
  }
  return static_cast<size_t>(most) * static_cast<size_t>(out) * sizeof(float);
}

namespace {

absl::Status CheckCall(const char* what, int out, int in, int k_multiple, const __half* x, int rows, float* y,
                       void* workspace, const DecodeEpilogue& e, GemmKernel kernel) {
  RETURN_IF_ERROR(CheckLinearCall(what, out, in, k_multiple, 65535 * 128, x, rows, y, e));
  if (kernel == GemmKernel::kWgmma && !DeviceRunsWgmma()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the wgmma kernel needs an sm_90 GPU and a build with sm_90a", what));
  }
  if (workspace == nullptr && !GemmWritesDirectly(PlanGemm(rows, out, in, kernel), e, out)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: [{}, {}] over {} rows needs a workspace of {} bytes", what, out, in, rows,
                    GemmLinearWorkspaceBytes(out, in, rows)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Nvfp4GemmLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue, GemmKernel kernel) {
  RETURN_IF_ERROR(CheckCall("nvfp4 gemm linear", w.out, w.in, kNvfp4Step, x, rows, y, workspace, epilogue, kernel));
  RETURN_IF_ERROR(CheckLinearWeights("nvfp4 gemm linear", w));
  return CudaStatus(LaunchNvfp4Gemm(w, x, rows, y, static_cast<float*>(workspace), epilogue, kernel, stream),
                    "nvfp4 gemm linear");
}

absl::Status Fp8GemmLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                           cudaStream_t stream, const DecodeEpilogue& epilogue, GemmKernel kernel) {
  RETURN_IF_ERROR(CheckCall("fp8 gemm linear", w.out, w.in, kFp8Step, x, rows, y, workspace, epilogue, kernel));
  RETURN_IF_ERROR(CheckLinearWeights("fp8 gemm linear", w));
  return CudaStatus(LaunchFp8Gemm(w, x, rows, y, static_cast<float*>(workspace), epilogue, kernel, stream),
                    "fp8 gemm linear");
}

}  // namespace sparkserve::kernels::cuda
