// QuantizedLinear: one Linear (or Embedding) module's weight exactly as the checkpoint stores it —
// NVFP4, FP8 or dense — with its scales as zero-copy views, validated, plus the reference CPU
// dequantisation. The CUDA backend reads the raw tensors; the CPU model calls DequantizeToF32.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace sparkserve::quant {

enum class WeightFormat : uint8_t { kNvfp4, kFp8, kDense };

// How an FP8 weight's scale is laid out.
enum class Fp8ScaleLayout : uint8_t { kPerTensor, kPerChannel, kBlock };

struct QuantizedLinear {
  std::string name;  // module name, e.g. "model.layers.0.mlp.down_proj"
  WeightFormat format = WeightFormat::kDense;
  int64_t out = 0, in = 0;  // logical weight shape [out, in]

  // kNvfp4 (nvfp4-pack-quantized):
  //   weight              u8      [out, in/2]   E2M1 codes, element 2j = low nibble of byte j
  //   weight_scale        fp8     [out, in/16]  per 16-element group, row-major
  //   weight_global_scale f32     [1]           a DIVISOR: W = e2m1 * (scale / global_scale)
  //   input_global_scale  f32     [1]           only for W4A4 (static activation global scale)
  // kFp8 (float-quantized / naive-quantized with 8-bit float weights):
  //   weight              fp8     [out, in]
  //   weight_scale        f32/bf16/f16: [1] per tensor, [out, 1] per channel, or
  //                       [ceil(out/block_rows), ceil(in/block_cols)] per block; W = fp8 * scale
  //   input_scale         f32/bf16/f16 [1], only for static activation scales
  // kDense: weight f32/bf16/f16 [out, in]; no scales.
  // `bias` ([out], dense) when the module has one. Undefined tensors are absent.
  core::Tensor weight;
  core::Tensor weight_scale;
  core::Tensor weight_global_scale;
  core::Tensor input_global_scale;
  core::Tensor input_scale;
  core::Tensor bias;

  Fp8ScaleLayout fp8_scale_layout = Fp8ScaleLayout::kPerTensor;
  int64_t block_rows = 128, block_cols = 128;  // kBlock only

  // "nvfp4", "fp8", or the dense weight's dtype: "bf16", "f16", "f32".
  std::string_view FormatName() const;
  // Bytes of every tensor above (weight, scales, bias).
  size_t bytes() const;

  // The f32 weight [out, in], bit-identical to the compressed-tensors library's decompression
  // (compressors/nvfp4/base.py, naive_quantized/base.py, quantization/lifecycle/forward.py):
  //   nvfp4: bf16(e2m1 * (f32(fp8 scale) / global_scale)) -- the library divides the scale by the
  //          global scale first, multiplies in f32 and, having unpacked into bf16, returns bf16;
  //   fp8:   f32(fp8) * scale computed in f32 and rounded to the scale's dtype (bf16/f16/f32);
  //   dense: the weight widened to f32.
  absl::StatusOr<core::Tensor> DequantizeToF32() const;

  // Checks dtypes and shapes of the tensors for `format` (and fills fp8_scale_layout from the
  // scale's shape; block_rows/cols must be set beforehand for block scales). Errors name the module.
  absl::Status Validate();
};

}  // namespace sparkserve::quant
