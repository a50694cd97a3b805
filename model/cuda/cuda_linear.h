// CudaLinear: one Linear's weight on the GPU in the form its kernels read — NVFP4 or per-channel
// FP8 repacked for the tensor-core decode kernels, else dense bf16 — and the one call that runs
// it over any number of rows (up to 8 rows the decode GEMV, 9..64 the skinny kernel of
// kernels/cuda/skinny_linear.h, more the tensor-core GEMM of kernels/cuda/gemm_linear.h, all on
// the same repacked weights).
// Opt-in (CudaLinearOptions::w4a4_prefill): NVFP4 W4A4 checkpoints run their prefill rows through
// the Blackwell block-scaled FP4 GEMM (kernels/cuda/w4a4_linear.h), UNTESTED ON HARDWARE.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/device_buffer.h"
#include "quant/quantized_linear.h"

namespace sparkserve::model::cuda {

template <typename T>
using DeviceBuffer = kernels::cuda::DeviceBuffer<T>;

enum class CudaLinearKind : uint8_t { kNvfp4, kFp8, kBf16 };

struct CudaLinearOptions {
  // On an sm_120 / sm_121 GPU, an NVFP4 linear whose parts all carry the same input_global_scale
  // (in % 128 == 0) also uploads the W4A4 layout and runs calls of more than kMaxDecodeRows rows
  // through kernels::cuda::Nvfp4W4A4Linear: activations quantised to NVFP4 with the calibrated
  // scale (what the checkpoint's W4A4 recipe means), block-scaled FP4 tensor cores. UNTESTED ON
  // HARDWARE until gpu_blackwell_test runs on one. Memory: a second copy of the weight,
  // ceil(out / 16) * 16 * in * 9 / 16 bytes (w4a4_bytes()), beside the decode layout. Ignored
  // elsewhere (other devices, FP8 / dense linears, modules without input_global_scale).
  bool w4a4_prefill = false;
};

class CudaLinear {
 public:
  CudaLinear() = default;
  CudaLinear(CudaLinear&&) = default;
  CudaLinear& operator=(CudaLinear&&) = default;

  // Uploads a checkpoint module. NVFP4 (in % 128 == 0) and FP8 per-tensor/per-channel (in % 64 == 0)
  // keep their format; anything else (dense, FP8 block scales, shapes the kernels do not take) is
  // dequantised by the reference (QuantizedLinear::DequantizeToF32) and kept as bf16.
  static absl::StatusOr<CudaLinear> Upload(const quant::QuantizedLinear& module, const CudaLinearOptions& options = {});
  // Several modules reading the same input, stacked along `out` in the given order (q|k|v,
  // gate|up, ...): one pass over the input for all. Needs CanFuse(parts).
  static absl::StatusOr<CudaLinear> UploadFused(std::span<const quant::QuantizedLinear* const> parts, std::string name,
                                                const CudaLinearOptions& options = {});
  // Whether the parts share `in` and the form Upload would give each (NVFP4 / FP8 / bf16).
  static bool CanFuse(std::span<const quant::QuantizedLinear* const> parts);
  // A dense f32 [out, in] weight kept as bf16.
  static absl::StatusOr<CudaLinear> FromF32(const core::Tensor& weight, std::string name);
  // A dense bf16 weight that lives elsewhere (the tied lm_head reads embed_tokens); not owned.
  static CudaLinear Bf16View(const __nv_bfloat16* weight, int out, int in, std::string name);

  // y [rows, out] f32 = x [rows, in] f16 . W^T. `workspace` holds workspace_bytes(rows) (or of any
  // larger row count: the size covers every call of up to that many rows).
  // NVFP4/FP8 linears (has_epilogues()) may instead hand their output to a fused epilogue
  // (SwiGLU, residual add + RMSNorm: kernels::cuda::DecodeEpilogue); y is then unused.
  absl::Status Run(const __half* x, int rows, float* y, void* workspace, cudaStream_t stream,
                   const kernels::cuda::DecodeEpilogue& epilogue = {}) const;
  bool has_epilogues() const { return kind_ != CudaLinearKind::kBf16; }
  size_t workspace_bytes(int rows) const;

  int out() const { return out_; }
  int in() const { return in_; }
  CudaLinearKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  // Bytes one pass over the weight reads (codes + scales), what a decode step pays for it.
  int64_t weight_bytes() const { return weight_bytes_; }
  // Whether rows > kMaxDecodeRows run the W4A4 GEMM, and the device bytes its layout adds.
  bool has_w4a4() const { return w4a4_codes_.size() > 0; }
  int64_t w4a4_bytes() const { return static_cast<int64_t>(w4a4_codes_.bytes() + w4a4_scales_.bytes()); }

 private:
  std::string name_;
  CudaLinearKind kind_ = CudaLinearKind::kBf16;
  int out_ = 0, in_ = 0;
  int64_t weight_bytes_ = 0;
  DeviceBuffer<uint8_t> codes_;       // nvfp4 packed codes / fp8 weight (decode layouts)
  DeviceBuffer<uint8_t> group_scales_;  // nvfp4 group scales (decode layout)
  DeviceBuffer<float> channel_scales_;  // fp8 per-output-channel scales [out]
  float global_scale_ = 1.0f;           // nvfp4 divisor
  DeviceBuffer<float> row_global_scales_;  // nvfp4 fused: [out] per-row divisors
  DeviceBuffer<__nv_bfloat16> dense_;   // bf16 [out, in] (owned)
  const __nv_bfloat16* dense_view_ = nullptr;
  // W4A4 prefill (CudaLinearOptions::w4a4_prefill): kernels::cuda::RepackNvfp4ForW4A4 layout.
  DeviceBuffer<uint8_t> w4a4_codes_, w4a4_scales_;
  float input_global_scale_ = 0.f;  // divisor of the activations, shared by every part

  absl::Status UploadW4A4(std::span<const quant::QuantizedLinear* const> parts, std::span<const uint8_t> codes,
                          std::span<const uint8_t> scales);
};

}  // namespace sparkserve::model::cuda
