// Decode linear layers: argument checks, workspace sizing and load-time weight repacking around the
// kernels of decode_linear.cu.
#include "kernels/cuda/decode_linear.h"

#include <algorithm>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/decode_linear_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

absl::Status CheckRows(int rows) {
  if (rows < 1 || rows > kMaxDecodeRows) {
    return absl::InvalidArgumentError(fmt::format("decode linear takes 1..{} rows, got {}", kMaxDecodeRows, rows));
  }
  return absl::OkStatus();
}

}  // namespace

Nvfp4DecodeLayout RepackNvfp4ForDecode(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int out,
                                       int in) {
  const int tiles = (out + 15) / 16, steps = in / kNvfp4Step;
  const size_t row_bytes = static_cast<size_t>(in) / 2, scale_row_bytes = static_cast<size_t>(in) / 16;
  Nvfp4DecodeLayout result{std::vector<uint8_t>(static_cast<size_t>(tiles) * steps * 1024),
                           std::vector<uint8_t>(static_cast<size_t>(tiles) * steps * 128)};
  auto nibble = [&](int row, int element) -> uint32_t {
    if (row >= out) return 0;
    const uint8_t b = packed[row * row_bytes + element / 2];
    return (element % 2) ? (b >> 4) : (b & 0xf);
  };
  // Pair k of word w (decode_layout.cuh): group 2w + k / 2, elements 2 (k % 2) (low half) and 2 (k % 2) + 1
  // (high half); magnitude at bits 3k.., sign at kE2m1PairSignBit[k] (+ 16 for the high half).
  for (int tile = 0; tile < tiles; ++tile) {
    for (int s = 0; s < steps; ++s) {
      const size_t block = static_cast<size_t>(tile) * steps + s;
      for (int h = 0; h < 2; ++h) {
        for (int lane = 0; lane < 32; ++lane) {
          const int q = lane / 4, t = lane % 4, row = tile * 16 + q + 8 * h;
          for (int w = 0; w < 4; ++w) {
            uint32_t word = 0;
            for (int k = 0; k < 4; ++k) {
              for (int half = 0; half < 2; ++half) {
                const uint32_t v = nibble(row, s * kNvfp4Step + 16 * (2 * w + k / 2) + 4 * t + 2 * (k % 2) + half);
                word |= (v & 7u) << (3 * k + 16 * half);
                word |= (v >> 3) << (kE2m1PairSignBit[k] + 16 * half);
              }
            }
            uint8_t* dst = result.packed.data() + block * 1024 + h * 512 + lane * 16 + 4 * w;
            for (int b = 0; b < 4; ++b) dst[b] = static_cast<uint8_t>(word >> (8 * b));
          }
        }
        for (int q = 0; q < 8; ++q) {
          const int row = tile * 16 + q + 8 * h;
          for (int g = 0; g < 8; ++g) {
            result.scales[block * 128 + q * 16 + h * 8 + g] = row < out ? scales[row * scale_row_bytes + s * 8 + g] : 0;
          }
        }
      }
    }
  }
  return result;
}

std::vector<uint8_t> RepackFp8ForDecode(std::span<const uint8_t> weight, int out, int in) {
  const int tiles = (out + 15) / 16, steps = in / kFp8Step;
  std::vector<uint8_t> result(static_cast<size_t>(tiles) * steps * 1024);
  for (int tile = 0; tile < tiles; ++tile) {
    for (int s = 0; s < steps; ++s) {
      uint8_t* block = result.data() + (static_cast<size_t>(tile) * steps + s) * 1024;
      for (int h = 0; h < 2; ++h) {
        for (int lane = 0; lane < 32; ++lane) {
          const int q = lane / 4, t = lane % 4, row = tile * 16 + q + 8 * h;
          if (row >= out) continue;
          const uint8_t* src = weight.data() + static_cast<size_t>(row) * in + s * kFp8Step;
          for (int g = 0; g < 4; ++g) {
            for (int b = 0; b < 4; ++b) block[h * 512 + lane * 16 + 4 * g + b] = src[16 * g + 4 * t + b];
          }
        }
      }
    }
  }
  return result;
}

size_t DecodeLinearWorkspaceBytes(int out, int in, int rows) {
  // The FP8 kernel's smaller K step allows at least as many splits as the NVFP4 one.
  const SplitPlan p = PlanSplits(out, in / kFp8Step);
  return static_cast<size_t>(p.num_splits) * rows * out * sizeof(float);
}

absl::Status CheckLinearEpilogue(const char* what, const DecodeEpilogue& e, int out, const float* y) {
  using K = DecodeEpilogue::Kind;
  const bool complete = (e.kind == K::kStore && y != nullptr) ||
                        (e.kind == K::kSwiGlu && e.x_out != nullptr && out % 2 == 0) ||
                        (e.kind == K::kAddRmsNorm && e.x_out != nullptr && e.residual != nullptr &&
                         e.norm_weight != nullptr && e.eps >= 0.f);
  if (complete) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{}: incomplete epilogue (kind {}) for {} outputs (kStore needs y, kSwiGlu x_out and an even out, "
                  "kAddRmsNorm x_out, residual, norm_weight and eps >= 0)",
                  what, static_cast<int>(e.kind), out));
}

absl::Status CheckLinearCall(const char* what, int out, int in, int k_multiple, int max_rows, const __half* x,
                             int rows, const float* y, const DecodeEpilogue& e) {
  if (out < 1 || in < k_multiple || in % k_multiple != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: needs out >= 1 and in a positive multiple of {} (got [{}, {}])", what, k_multiple, out, in));
  }
  if (rows < 1 || rows > max_rows) {
    return absl::InvalidArgumentError(fmt::format("{}: rows must be in 1..{} (got {})", what, max_rows, rows));
  }
  if (x == nullptr || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return absl::InvalidArgumentError(fmt::format("{}: x must be a 16-byte aligned device pointer", what));
  }
  return CheckLinearEpilogue(what, e, out, y);
}

absl::Status CheckLinearWeights(const char* what, const Nvfp4LinearDevice& w) {
  if (w.packed == nullptr || w.scales == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: missing packed codes or group scales", what));
  }
  if (w.row_global_scales == nullptr && !(w.global_scale > 0.f)) {
    return absl::InvalidArgumentError(fmt::format("{}: global_scale must be positive (got {})", what, w.global_scale));
  }
  return absl::OkStatus();
}

absl::Status CheckLinearWeights(const char* what, const Fp8LinearDevice& w) {
  if (w.weight == nullptr || w.scales == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: missing weight or per-channel scales", what));
  }
  return absl::OkStatus();
}

absl::Status Nvfp4DecodeLinear(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                               cudaStream_t stream, const DecodeEpilogue& epilogue) {
  RETURN_IF_ERROR(CheckRows(rows));
  RETURN_IF_ERROR(CheckLinearEpilogue("nvfp4 decode linear", epilogue, w.out, y));
  if (w.in % kNvfp4Step != 0 || w.out < 1) {
    return absl::InvalidArgumentError(fmt::format("nvfp4 decode linear needs in % 128 == 0 (got [{}, {}])", w.out, w.in));
  }
  return CudaStatus(LaunchNvfp4Decode(w, x, rows, y, static_cast<float*>(workspace), epilogue, stream),
                    "nvfp4 decode linear");
}

absl::Status Fp8DecodeLinear(const Fp8LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue) {
  RETURN_IF_ERROR(CheckRows(rows));
  RETURN_IF_ERROR(CheckLinearEpilogue("fp8 decode linear", epilogue, w.out, y));
  if (w.in % kFp8Step != 0 || w.out < 1) {
    return absl::InvalidArgumentError(fmt::format("fp8 decode linear needs in % 64 == 0 (got [{}, {}])", w.out, w.in));
  }
  return CudaStatus(LaunchFp8Decode(w, x, rows, y, static_cast<float*>(workspace), epilogue, stream),
                    "fp8 decode linear");
}

}  // namespace sparkserve::kernels::cuda
