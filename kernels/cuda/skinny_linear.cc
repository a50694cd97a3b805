// Skinny linear layers: argument checks and workspace sizing around the kernels of skinny_linear.cu.
#include "kernels/cuda/skinny_linear.h"

#include <algorithm>
#include <cstdint>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/skinny_linear_kernels.h"

namespace sparkserve::kernels::cuda {

size_t SkinnyLinearWorkspaceBytes(int out, int in, int rows) {
  if (out < 1 || in < kFp8Step || rows < 1) return 0;
  // planes * r is not monotone in r (the grid halves past 32 rows), so take the most over 1..rows,
  // for each format the shape allows.
  int64_t most = 0;
  for (int r = 1; r <= std::min(rows, kMaxSkinnyRows); ++r) {
    for (const bool nvfp4 : {true, false}) {
      if (in % (nvfp4 ? kNvfp4Step : kFp8Step) != 0) continue;
      most = std::max<int64_t>(most, static_cast<int64_t>(PlanSkinny(nvfp4, r, out, in).planes) * r);
    }
  }
  return static_cast<size_t>(most) * static_cast<size_t>(out) * sizeof(float);
}

namespace {

absl::Status CheckCall(const char* what, int out, int in, int k_multiple, const __half* x, int rows, float* y,
                       void* workspace, const DecodeEpilogue& e) {
  RETURN_IF_ERROR(CheckLinearCall(what, out, in, k_multiple, kMaxSkinnyRows, x, rows, y, e));
  if (workspace == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: [{}, {}] over {} rows needs a workspace of {} bytes", what, out,
                                                  in, rows, SkinnyLinearWorkspaceBytes(out, in, rows)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Nvfp4SkinnyLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                               cudaStream_t stream, const DecodeEpilogue& epilogue) {
  RETURN_IF_ERROR(CheckCall("nvfp4 skinny linear", w.out, w.in, kNvfp4Step, x, rows, y, workspace, epilogue));
  RETURN_IF_ERROR(CheckLinearWeights("nvfp4 skinny linear", w));
  return CudaStatus(LaunchNvfp4Skinny(w, x, rows, y, static_cast<float*>(workspace), epilogue, stream),
                    "nvfp4 skinny linear");
}

absl::Status Fp8SkinnyLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue) {
  RETURN_IF_ERROR(CheckCall("fp8 skinny linear", w.out, w.in, kFp8Step, x, rows, y, workspace, epilogue));
  RETURN_IF_ERROR(CheckLinearWeights("fp8 skinny linear", w));
  return CudaStatus(LaunchFp8Skinny(w, x, rows, y, static_cast<float*>(workspace), epilogue, stream),
                    "fp8 skinny linear");
}

}  // namespace sparkserve::kernels::cuda
