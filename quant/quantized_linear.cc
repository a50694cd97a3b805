// QuantizedLinear validation and reference dequantisation (see quantized_linear.h).
#include "quant/quantized_linear.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "fmt/format.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::quant {
namespace {

using core::DType;

// Element loads through memcpy: views into a file need not be aligned.
template <typename T>
T Load(const core::Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(t.raw_data()) + i * sizeof(T), sizeof(T));
  return v;
}

// Element i of a floating tensor (f32/bf16/f16/fp8) as f32.
float LoadAsF32(const core::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return Load<float>(t, i);
    case DType::kBF16: return core::Bf16ToF32(Load<uint16_t>(t, i));
    case DType::kF16: return core::F16ToF32(Load<uint16_t>(t, i));
    case DType::kF8E4M3: return E4M3ToF32(Load<uint8_t>(t, i));
    default: return NAN;
  }
}

// Rounds an f32 result to `dtype` (bf16/f16) and back, as a torch op producing that dtype does.
float RoundTo(float v, DType dtype) {
  if (dtype == DType::kBF16) return core::Bf16ToF32(core::F32ToBf16(v));
  if (dtype == DType::kF16) return core::F16ToF32(core::F32ToF16(v));
  return v;
}

bool IsDenseFloat(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string_view QuantizedLinear::FormatName() const {
  switch (format) {
    case WeightFormat::kNvfp4: return "nvfp4";
    case WeightFormat::kFp8: return "fp8";
    case WeightFormat::kDense: return weight.defined() ? core::DTypeName(weight.dtype()) : "dense";
  }
  return "?";
}

size_t QuantizedLinear::bytes() const {
  size_t n = 0;
  for (const core::Tensor* t : {&weight, &weight_scale, &weight_global_scale, &input_global_scale, &input_scale, &bias}) {
    if (t->defined()) n += t->nbytes();
  }
  return n;
}

absl::Status QuantizedLinear::Validate() {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("module '{}' ({}): {}", name, FormatName(), what));
  };
  auto desc = [](const core::Tensor& t) { return t.ToString(); };
  auto is_single = [](const core::Tensor& t) { return t.numel() == 1 && t.rank() <= 1; };
  if (!weight.defined()) return bad("no weight tensor");
  if (weight.rank() != 2) return bad(fmt::format("weight is {}, expected a 2-D tensor", desc(weight)));
  out = weight.dim(0);
  in = format == WeightFormat::kNvfp4 ? 2 * weight.dim(1) : weight.dim(1);

  switch (format) {
    case WeightFormat::kNvfp4: {
      if (weight.dtype() != DType::kU8) return bad(fmt::format("weight_packed is {}, expected u8", desc(weight)));
      if (in % 16 != 0) return bad(fmt::format("input size {} is not a multiple of the NVFP4 group size 16", in));
      if (!weight_scale.defined()) return bad("missing weight_scale");
      if (weight_scale.dtype() != DType::kF8E4M3 || weight_scale.shape() != core::Shape{out, in / 16}) {
        return bad(fmt::format("weight_scale is {}, expected fp8_e4m3[{}, {}]", desc(weight_scale), out, in / 16));
      }
      if (!weight_global_scale.defined()) return bad("missing weight_global_scale");
      if (weight_global_scale.dtype() != DType::kF32 || !is_single(weight_global_scale)) {
        return bad(fmt::format("weight_global_scale is {}, expected f32[1]", desc(weight_global_scale)));
      }
      const float gs = Load<float>(weight_global_scale, 0);
      if (!std::isfinite(gs) || gs == 0.0f) return bad(fmt::format("weight_global_scale is {}", gs));
      if (input_global_scale.defined() && (input_global_scale.dtype() != DType::kF32 || !is_single(input_global_scale))) {
        return bad(fmt::format("input_global_scale is {}, expected f32[1]", desc(input_global_scale)));
      }
      if (input_scale.defined()) return bad("unexpected input_scale for NVFP4");
      break;
    }
    case WeightFormat::kFp8: {
      if (weight.dtype() != DType::kF8E4M3) return bad(fmt::format("weight is {}, expected fp8_e4m3", desc(weight)));
      if (!weight_scale.defined()) return bad("missing weight_scale");
      if (!IsDenseFloat(weight_scale.dtype())) {
        return bad(fmt::format("weight_scale is {}, expected f32, bf16 or f16", desc(weight_scale)));
      }
      const core::Shape& s = weight_scale.shape();
      if (is_single(weight_scale) || s == core::Shape{1, 1}) {
        fp8_scale_layout = Fp8ScaleLayout::kPerTensor;
      } else if (s == core::Shape{out, 1} || s == core::Shape{out}) {
        fp8_scale_layout = Fp8ScaleLayout::kPerChannel;
      } else if (block_rows > 0 && block_cols > 0 &&
                 s == core::Shape{CeilDiv(out, block_rows), CeilDiv(in, block_cols)}) {
        fp8_scale_layout = Fp8ScaleLayout::kBlock;
      } else {
        return bad(fmt::format("weight_scale is {}; expected [1] (per tensor), [{}, 1] (per channel) or [{}, {}] "
                               "({}x{} blocks)", desc(weight_scale), out, CeilDiv(out, block_rows),
                               CeilDiv(in, block_cols), block_rows, block_cols));
      }
      if (weight_global_scale.defined() || input_global_scale.defined()) return bad("unexpected global scale for FP8");
      if (input_scale.defined() && (!IsDenseFloat(input_scale.dtype()) || !is_single(input_scale))) {
        return bad(fmt::format("input_scale is {}, expected one f32/bf16/f16 value", desc(input_scale)));
      }
      break;
    }
    case WeightFormat::kDense: {
      if (!IsDenseFloat(weight.dtype())) return bad(fmt::format("weight is {}, expected f32, bf16 or f16", desc(weight)));
      if (weight_scale.defined() || weight_global_scale.defined() || input_global_scale.defined() ||
          input_scale.defined()) {
        return bad("a dense weight has quantization scales");
      }
      break;
    }
  }
  if (bias.defined() && (!IsDenseFloat(bias.dtype()) || bias.shape() != core::Shape{out})) {
    return bad(fmt::format("bias is {}, expected [{}]", desc(bias), out));
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Tensor> QuantizedLinear::DequantizeToF32() const {
  if (!weight.defined() || !weight.device().is_cpu()) {
    return absl::FailedPreconditionError(fmt::format("module '{}': dequantisation needs CPU tensors", name));
  }
  core::Tensor result = core::Tensor::Empty({out, in}, DType::kF32);
  float* dst = result.data<float>();
  switch (format) {
    case WeightFormat::kNvfp4: {
      const float gs = Load<float>(weight_global_scale, 0);
      const int64_t groups = in / 16;
      const auto* packed = static_cast<const uint8_t*>(weight.raw_data());
      for (int64_t r = 0; r < out; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          // The library: scale.to(bf16) (exact for fp8) / global_scale -> f32.
          const float s = E4M3ToF32(Load<uint8_t>(weight_scale, r * groups + g)) / gs;
          for (int64_t k = 0; k < 16; k += 2) {
            const uint8_t byte = packed[(r * in + g * 16 + k) / 2];
            float* o = dst + r * in + g * 16 + k;
            o[0] = RoundTo(E2M1ToF32(byte & 0xf) * s, DType::kBF16);
            o[1] = RoundTo(E2M1ToF32(byte >> 4) * s, DType::kBF16);
          }
        }
      }
      break;
    }
    case WeightFormat::kFp8: {
      const DType sdt = weight_scale.dtype();
      const int64_t scale_cols = fp8_scale_layout == Fp8ScaleLayout::kBlock ? CeilDiv(in, block_cols) : 1;
      std::vector<float> scales(static_cast<size_t>(weight_scale.numel()));
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = LoadAsF32(weight_scale, static_cast<int64_t>(i));
      const auto* w = static_cast<const uint8_t*>(weight.raw_data());
      for (int64_t r = 0; r < out; ++r) {
        const float* row_scales = scales.data();
        if (fp8_scale_layout == Fp8ScaleLayout::kPerChannel) row_scales += r;
        if (fp8_scale_layout == Fp8ScaleLayout::kBlock) row_scales += (r / block_rows) * scale_cols;
        for (int64_t c = 0; c < in; ++c) {
          const float s = fp8_scale_layout == Fp8ScaleLayout::kBlock ? row_scales[c / block_cols] : row_scales[0];
          dst[r * in + c] = RoundTo(E4M3ToF32(w[r * in + c]) * s, sdt);
        }
      }
      break;
    }
    case WeightFormat::kDense: {
      const int64_t n = out * in;
      for (int64_t i = 0; i < n; ++i) dst[i] = LoadAsF32(weight, i);
      break;
    }
  }
  return result;
}

}  // namespace sparkserve::quant
