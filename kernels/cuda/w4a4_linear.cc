// The W4A4 linear's host side: the load-time weight repack, the device check, workspace sizing and
// the chunked quantise -> GEMM -> epilogue sequence around the kernels of w4a4_linear.cu.
#include "kernels/cuda/w4a4_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/nvfp4_activation_quant.h"
#include "kernels/cuda/w4a4_linear_kernels.h"

namespace sparkserve::kernels::cuda {

Nvfp4W4A4Layout RepackNvfp4ForW4A4(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int out, int in) {
  const int tiles = (out + 15) / 16, steps = in / kW4a4KStep;
  const size_t row_bytes = static_cast<size_t>(in) / 2, scale_row_bytes = static_cast<size_t>(in) / 16;
  Nvfp4W4A4Layout result{std::vector<uint8_t>(static_cast<size_t>(tiles) * steps * 512, 0),
                         std::vector<uint8_t>(static_cast<size_t>(tiles) * steps * 64, 0)};
  for (int tile = 0; tile < tiles; ++tile) {
    for (int s = 0; s < steps; ++s) {
      const size_t block = static_cast<size_t>(tile) * steps + s;
      uint8_t* codes = result.codes.data() + block * 512;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int reg = 0; reg < 4; ++reg) {
          // Register `reg`: row g (+8 for odd registers), K 8t.. (+32 for registers 2, 3) of the step.
          const int row = tile * 16 + g + 8 * (reg & 1);
          const int k0 = s * kW4a4KStep + 8 * t + 32 * (reg >> 1);
          if (row >= out) continue;
          // 8 codes = 4 row-major bytes, element k0 + j at nibble j of their little-endian word.
          std::memcpy(codes + 16 * lane + 4 * reg, packed.data() + row * row_bytes + k0 / 2, 4);
        }
      }
      uint8_t* sc = result.scales.data() + block * 64;
      for (int r = 0; r < 16; ++r) {
        const int row = tile * 16 + r;
        if (row >= out) continue;
        std::memcpy(sc + 4 * r, scales.data() + row * scale_row_bytes + 4 * s, 4);
      }
    }
  }
  return result;
}

bool W4A4LinearSupportedOnCurrentDevice() {
  static const bool supported = [] {  // looked up once per process (a process drives one GPU)
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major == 12;  // sm_120 / sm_121: the targets with the block-scaled FP4 mma.sync
  }();
  return supported;
}

namespace {

size_t AlignUp(size_t n) { return (n + 255) & ~size_t{255}; }

// Workspace layout for a chunk of `n` rows: activation codes, activation scales, fp32 partials.
struct ChunkWorkspace {
  size_t codes, scales, partial, total;
};
ChunkWorkspace ChunkLayout(int out, int in, int n) {
  ChunkWorkspace w;
  w.codes = 0;
  w.scales = AlignUp(static_cast<size_t>(n) * in / 2);
  w.partial = w.scales + AlignUp(static_cast<size_t>(n) * in / 16);
  w.total = w.partial + AlignUp(static_cast<size_t>(n) * out * sizeof(float));
  return w;
}

}  // namespace

size_t W4A4LinearWorkspaceBytes(int out, int in, int rows) {
  return ChunkLayout(out, in, std::clamp(rows, 1, kW4a4ChunkRows)).total;
}

absl::Status Nvfp4W4A4Linear(const Nvfp4W4A4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue, W4A4Mma mma) {
  if (rows < 1) return absl::InvalidArgumentError(fmt::format("W4A4 linear: rows must be >= 1, got {}", rows));
  if (w.out < 1 || w.in < kW4a4MinIn || w.in % kW4a4MinIn != 0) {
    return absl::InvalidArgumentError(
        fmt::format("W4A4 linear: needs out >= 1 and in a multiple of {} (got [{}, {}])", kW4a4MinIn, w.out, w.in));
  }
  if (w.codes == nullptr || w.scales == nullptr || x == nullptr || workspace == nullptr) {
    return absl::InvalidArgumentError("W4A4 linear: weights, x and workspace must be non-null");
  }
  if (!(w.input_global_scale > 0.f) || !std::isfinite(w.input_global_scale)) {
    return absl::InvalidArgumentError(
        fmt::format("W4A4 linear: input_global_scale must be finite and > 0, got {}", w.input_global_scale));
  }
  if (w.row_global_scales == nullptr && (!(w.weight_global_scale > 0.f) || !std::isfinite(w.weight_global_scale))) {
    return absl::InvalidArgumentError(
        fmt::format("W4A4 linear: weight_global_scale must be finite and > 0, got {}", w.weight_global_scale));
  }
  RETURN_IF_ERROR(CheckLinearEpilogue("W4A4 linear", epilogue, w.out, y));
  if (mma == W4A4Mma::kHardware && !W4A4LinearSupportedOnCurrentDevice()) {
    int dev = 0, major = 0, minor = 0;
    (void)cudaGetDevice(&dev);
    (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return absl::FailedPreconditionError(fmt::format(
        "W4A4 linear: needs an sm_120 / sm_121 GPU (block-scaled FP4 mma.sync); this device is sm_{}{}", major, minor));
  }
  const ChunkWorkspace ws = ChunkLayout(w.out, w.in, std::min(rows, kW4a4ChunkRows));
  uint8_t* base = static_cast<uint8_t*>(workspace);
  const Nvfp4Activations act{base + ws.codes, base + ws.scales};
  float* partial = reinterpret_cast<float*>(base + ws.partial);
  // The accumulators hold sum(e2m1_w * s_w * e2m1_x * s_x): both global scales divide.
  const float scale = w.row_global_scales != nullptr
                          ? static_cast<float>(1.0 / w.input_global_scale)
                          : static_cast<float>(1.0 / (static_cast<double>(w.weight_global_scale) * w.input_global_scale));
  for (int r0 = 0; r0 < rows; r0 += kW4a4ChunkRows) {
    const int n = std::min(kW4a4ChunkRows, rows - r0);
    RETURN_IF_ERROR(QuantizeActivationsNvfp4(x + static_cast<size_t>(r0) * w.in, n, w.in, w.input_global_scale, act,
                                             stream));
    RETURN_IF_ERROR(CudaStatus(LaunchW4A4Gemm(w, act, n, partial, mma, stream), "W4A4 GEMM"));
    const SplitSum sum{partial, 1, n, w.out, scale, nullptr, w.row_global_scales};
    float* yr = y != nullptr ? y + static_cast<size_t>(r0) * w.out : nullptr;
    RETURN_IF_ERROR(CudaStatus(LaunchLinearEpilogue(sum, yr, epilogue.FromRow(r0, w.out), stream), "W4A4 epilogue"));
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::kernels::cuda
