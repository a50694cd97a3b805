// CudaLinear: upload (repacking NVFP4/FP8 for the decode kernels, bf16 otherwise) and dispatch.
#include "model/cuda/cuda_linear.h"

#include <algorithm>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/dense_linear.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

namespace {

absl::StatusOr<DeviceBuffer<uint8_t>> UploadBytes(std::span<const uint8_t> bytes) {
  return DeviceBuffer<uint8_t>::FromHost(bytes);
}

}  // namespace

absl::StatusOr<CudaLinear> CudaLinear::FromF32(const core::Tensor& weight, std::string name) {
  if (weight.rank() != 2 || weight.dtype() != core::DType::kF32) {
    return absl::InvalidArgumentError(fmt::format("{}: expected an f32 [out, in] weight, got {}", name, weight.ToString()));
  }
  CudaLinear l;
  l.name_ = std::move(name);
  l.kind_ = CudaLinearKind::kBf16;
  l.out_ = static_cast<int>(weight.dim(0));
  l.in_ = static_cast<int>(weight.dim(1));
  std::vector<uint16_t> bf16(static_cast<size_t>(weight.numel()));
  const float* src = weight.data<float>();
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = core::F32ToBf16(src[i]);
  ASSIGN_OR_RETURN(l.dense_, DeviceBuffer<__nv_bfloat16>::Allocate(bf16.size()));
  RETURN_IF_ERROR(kc::CudaStatus(cudaMemcpy(l.dense_.data(), bf16.data(), bf16.size() * 2, cudaMemcpyHostToDevice),
                                 "upload bf16 weight"));
  l.weight_bytes_ = static_cast<int64_t>(bf16.size()) * 2;
  return l;
}

CudaLinear CudaLinear::Bf16View(const __nv_bfloat16* weight, int out, int in, std::string name) {
  CudaLinear l;
  l.name_ = std::move(name);
  l.kind_ = CudaLinearKind::kBf16;
  l.out_ = out;
  l.in_ = in;
  l.dense_view_ = weight;
  l.weight_bytes_ = static_cast<int64_t>(out) * in * 2;
  return l;
}

absl::StatusOr<CudaLinear> CudaLinear::Upload(const quant::QuantizedLinear& m) {
  const int out = static_cast<int>(m.out), in = static_cast<int>(m.in);
  if (m.bias.defined()) {
    return absl::UnimplementedError(fmt::format("{}: linear bias is not supported by the CUDA backend", m.name));
  }
  if (m.format == quant::WeightFormat::kNvfp4 && in % 128 == 0) {
    CudaLinear l;
    l.name_ = m.name;
    l.kind_ = CudaLinearKind::kNvfp4;
    l.out_ = out;
    l.in_ = in;
    const kc::Nvfp4DecodeLayout packed = kc::RepackNvfp4ForDecode(m.weight.bytes(), m.weight_scale.bytes(), out, in);
    ASSIGN_OR_RETURN(l.codes_, UploadBytes(packed.packed));
    ASSIGN_OR_RETURN(l.group_scales_, UploadBytes(packed.scales));
    ASSIGN_OR_RETURN(core::Tensor gs, core::ToF32(m.weight_global_scale));
    l.global_scale_ = gs.data<float>()[0];
    l.weight_bytes_ = static_cast<int64_t>(packed.packed.size() + packed.scales.size());
    return l;
  }
  if (m.format == quant::WeightFormat::kFp8 && in % 64 == 0 &&
      (m.fp8_scale_layout == quant::Fp8ScaleLayout::kPerChannel || m.fp8_scale_layout == quant::Fp8ScaleLayout::kPerTensor)) {
    CudaLinear l;
    l.name_ = m.name;
    l.kind_ = CudaLinearKind::kFp8;
    l.out_ = out;
    l.in_ = in;
    const std::vector<uint8_t> packed = kc::RepackFp8ForDecode(m.weight.bytes(), out, in);
    ASSIGN_OR_RETURN(l.codes_, UploadBytes(packed));
    ASSIGN_OR_RETURN(core::Tensor s, core::ToF32(m.weight_scale));
    std::vector<float> scales(static_cast<size_t>(out));
    for (int o = 0; o < out; ++o) {
      scales[static_cast<size_t>(o)] = m.fp8_scale_layout == quant::Fp8ScaleLayout::kPerTensor ? s.data<float>()[0]
                                                                                               : s.data<float>()[o];
    }
    ASSIGN_OR_RETURN(l.channel_scales_, DeviceBuffer<float>::FromHost(scales));
    l.weight_bytes_ = static_cast<int64_t>(packed.size() + scales.size() * sizeof(float));
    return l;
  }
  ASSIGN_OR_RETURN(core::Tensor dense, m.DequantizeToF32());
  return FromF32(dense, m.name);
}

size_t CudaLinear::workspace_bytes(int rows) const {
  if (kind_ == CudaLinearKind::kBf16) return 0;
  return kc::DecodeLinearWorkspaceBytes(out_, in_, std::min(rows, kc::kMaxDecodeRows));
}

absl::Status CudaLinear::Run(const __half* x, int rows, float* y, void* workspace, cudaStream_t stream) const {
  if (kind_ == CudaLinearKind::kBf16) {
    return kc::DenseLinearBf16(dense_view_ != nullptr ? dense_view_ : dense_.data(), out_, in_, x, rows, y, stream);
  }
  for (int r = 0; r < rows; r += kc::kMaxDecodeRows) {
    const int n = std::min(kc::kMaxDecodeRows, rows - r);
    const __half* xr = x + static_cast<int64_t>(r) * in_;
    float* yr = y + static_cast<int64_t>(r) * out_;
    if (kind_ == CudaLinearKind::kNvfp4) {
      const kc::Nvfp4LinearDevice w{codes_.data(), group_scales_.data(), global_scale_, out_, in_};
      RETURN_IF_ERROR(kc::Nvfp4DecodeLinear(w, xr, n, yr, workspace, stream));
    } else {
      const kc::Fp8LinearDevice w{codes_.data(), channel_scales_.data(), out_, in_};
      RETURN_IF_ERROR(kc::Fp8DecodeLinear(w, xr, n, yr, workspace, stream));
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
