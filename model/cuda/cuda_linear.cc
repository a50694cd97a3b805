// CudaLinear: upload (repacking NVFP4/FP8 for the decode kernels, bf16 otherwise) and dispatch.
#include "model/cuda/cuda_linear.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/dense_linear.h"
#include "kernels/cuda/gemm_linear.h"
#include "kernels/cuda/skinny_linear.h"
#include "kernels/cuda/w4a4_linear.h"

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

namespace {

// The form a module keeps on the GPU.
CudaLinearKind KindFor(const quant::QuantizedLinear& m) {
  if (m.format == quant::WeightFormat::kNvfp4 && m.in % 128 == 0) return CudaLinearKind::kNvfp4;
  if (m.format == quant::WeightFormat::kFp8 && m.in % 64 == 0 &&
      (m.fp8_scale_layout == quant::Fp8ScaleLayout::kPerChannel || m.fp8_scale_layout == quant::Fp8ScaleLayout::kPerTensor)) {
    return CudaLinearKind::kFp8;
  }
  return CudaLinearKind::kBf16;
}

// Row-major bytes of every part's tensor `get(part)`, stacked.
template <typename Get>
std::vector<uint8_t> Stack(std::span<const quant::QuantizedLinear* const> parts, Get get) {
  std::vector<uint8_t> all;
  for (const quant::QuantizedLinear* m : parts) {
    const std::span<const uint8_t> b = get(*m).bytes();
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

}  // namespace

bool CudaLinear::CanFuse(std::span<const quant::QuantizedLinear* const> parts) {
  if (parts.empty()) return false;
  for (const quant::QuantizedLinear* m : parts) {
    if (m->in != parts[0]->in || KindFor(*m) != KindFor(*parts[0]) || m->bias.defined()) return false;
  }
  return true;
}

absl::StatusOr<CudaLinear> CudaLinear::Upload(const quant::QuantizedLinear& m, const CudaLinearOptions& options) {
  const quant::QuantizedLinear* parts[] = {&m};
  return UploadFused(parts, m.name, options);
}

absl::Status CudaLinear::UploadW4A4(std::span<const quant::QuantizedLinear* const> parts, std::span<const uint8_t> codes,
                                    std::span<const uint8_t> scales) {
  if (!kc::W4A4LinearSupportedOnCurrentDevice() || in_ % kc::kW4a4MinIn != 0) return absl::OkStatus();
  float gs = 0.f;
  for (const quant::QuantizedLinear* m : parts) {  // one quantisation of the shared input serves every part
    if (!m->input_global_scale.defined()) return absl::OkStatus();
    ASSIGN_OR_RETURN(core::Tensor t, core::ToF32(m->input_global_scale));
    const float v = t.data<float>()[0];
    if (!(v > 0.f) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(fmt::format("{}: input_global_scale is {}", m->name, v));
    }
    if (gs != 0.f && v != gs) return absl::OkStatus();
    gs = v;
  }
  const kc::Nvfp4W4A4Layout layout = kc::RepackNvfp4ForW4A4(codes, scales, out_, in_);
  ASSIGN_OR_RETURN(w4a4_codes_, UploadBytes(layout.codes));
  ASSIGN_OR_RETURN(w4a4_scales_, UploadBytes(layout.scales));
  input_global_scale_ = gs;
  return absl::OkStatus();
}

absl::StatusOr<CudaLinear> CudaLinear::UploadFused(std::span<const quant::QuantizedLinear* const> parts,
                                                   std::string name, const CudaLinearOptions& options) {
  for (const quant::QuantizedLinear* m : parts) {
    if (m->bias.defined()) {
      return absl::UnimplementedError(fmt::format("{}: linear bias is not supported by the CUDA backend", m->name));
    }
  }
  if (!CanFuse(parts)) {
    return absl::InvalidArgumentError(fmt::format("{}: parts differ in input size or weight form", name));
  }
  int64_t total_out = 0;
  for (const quant::QuantizedLinear* m : parts) total_out += m->out;
  const int out = static_cast<int>(total_out), in = static_cast<int>(parts[0]->in);
  CudaLinear l;
  l.name_ = std::move(name);
  l.kind_ = KindFor(*parts[0]);
  l.out_ = out;
  l.in_ = in;
  if (l.kind_ == CudaLinearKind::kNvfp4) {
    const std::vector<uint8_t> codes = Stack(parts, [](const quant::QuantizedLinear& m) -> const core::Tensor& { return m.weight; });
    const std::vector<uint8_t> scales =
        Stack(parts, [](const quant::QuantizedLinear& m) -> const core::Tensor& { return m.weight_scale; });
    const kc::Nvfp4DecodeLayout packed = kc::RepackNvfp4ForDecode(codes, scales, out, in);
    ASSIGN_OR_RETURN(l.codes_, UploadBytes(packed.packed));
    ASSIGN_OR_RETURN(l.group_scales_, UploadBytes(packed.scales));
    l.weight_bytes_ = static_cast<int64_t>(packed.packed.size() + packed.scales.size());
    std::vector<float> divisors;
    for (const quant::QuantizedLinear* m : parts) {
      ASSIGN_OR_RETURN(core::Tensor gs, core::ToF32(m->weight_global_scale));
      divisors.insert(divisors.end(), static_cast<size_t>(m->out), gs.data<float>()[0]);
    }
    l.global_scale_ = divisors[0];
    if (parts.size() > 1) {
      ASSIGN_OR_RETURN(l.row_global_scales_, DeviceBuffer<float>::FromHost(divisors));
    }
    if (options.w4a4_prefill) RETURN_IF_ERROR(l.UploadW4A4(parts, codes, scales));
    return l;
  }
  if (l.kind_ == CudaLinearKind::kFp8) {
    const std::vector<uint8_t> codes = Stack(parts, [](const quant::QuantizedLinear& m) -> const core::Tensor& { return m.weight; });
    const std::vector<uint8_t> packed = kc::RepackFp8ForDecode(codes, out, in);
    ASSIGN_OR_RETURN(l.codes_, UploadBytes(packed));
    std::vector<float> scales;
    for (const quant::QuantizedLinear* m : parts) {
      ASSIGN_OR_RETURN(core::Tensor s, core::ToF32(m->weight_scale));
      for (int64_t o = 0; o < m->out; ++o) {
        scales.push_back(m->fp8_scale_layout == quant::Fp8ScaleLayout::kPerTensor ? s.data<float>()[0] : s.data<float>()[o]);
      }
    }
    ASSIGN_OR_RETURN(l.channel_scales_, DeviceBuffer<float>::FromHost(scales));
    l.weight_bytes_ = static_cast<int64_t>(packed.size() + scales.size() * sizeof(float));
    return l;
  }
  core::Tensor dense = core::Tensor::Empty({out, in}, core::DType::kF32);
  int64_t row = 0;
  for (const quant::QuantizedLinear* m : parts) {
    ASSIGN_OR_RETURN(core::Tensor part, m->DequantizeToF32());
    std::copy_n(part.data<float>(), part.numel(), dense.data<float>() + row * in);
    row += m->out;
  }
  return FromF32(dense, l.name_);
}

namespace {

// Between the decode GEMV and the GEMM: the skinny kernel (one weight pass, mma per 8 rows) up to 32
// rows; past 32 rows the GEMM where it runs wgmma (sm_90a), else the skinny kernel up to 64 rows
// except on very wide outputs. Measured on the H200 (bench/RESULTS.md, session 5), 64 rows, wgmma vs
// skinny: 2560x9216 NVFP4 17.1 vs 20.6 us, 12288x2560 FP8 22.2 vs 28.8, 8192x2560 NVFP4 16.7 vs
// 19.4, 18432x2560 NVFP4 37.6 vs 36.7, a quarter of the FP8 lm_head 63 vs 120; at 32 rows the skinny
// kernel (18432x2560 NVFP4 23.7 us; the GEMM computes 64 rows whatever). Without wgmma (session 4):
// the 248k-output FP8 lm_head at 64 rows 479 us skinny vs 364 on the mma.sync GEMM.
constexpr int kSkinnyAlwaysRows = 32;
constexpr int kSkinnyMaxOutPast32Rows = 32768;

bool TakesSkinny(int rows, int out) {
  if (rows <= kc::kMaxDecodeRows || rows > kc::kMaxSkinnyRows) return false;
  return rows <= kSkinnyAlwaysRows || (!kc::DeviceRunsWgmma() && out <= kSkinnyMaxOutPast32Rows);
}

}  // namespace

size_t CudaLinear::workspace_bytes(int rows) const {
  if (kind_ == CudaLinearKind::kBf16) return 0;
  size_t bytes = kc::DecodeLinearWorkspaceBytes(out_, in_, std::min(rows, kc::kMaxDecodeRows));
  if (rows > kc::kMaxDecodeRows) {
    bytes = std::max(bytes, kc::SkinnyLinearWorkspaceBytes(out_, in_, std::min(rows, kc::kMaxSkinnyRows)));
  }
  if (rows > kSkinnyAlwaysRows) bytes = std::max(bytes, kc::GemmLinearWorkspaceBytes(out_, in_, rows));
  if (has_w4a4() && rows > kc::kMaxDecodeRows) bytes = std::max(bytes, kc::W4A4LinearWorkspaceBytes(out_, in_, rows));
  return bytes;
}

absl::Status CudaLinear::Run(const __half* x, int rows, float* y, void* workspace, cudaStream_t stream,
                             const kc::DecodeEpilogue& epilogue) const {
  if (kind_ == CudaLinearKind::kBf16) {
    if (epilogue.kind != kc::DecodeEpilogue::Kind::kStore) {
      return absl::InvalidArgumentError(fmt::format("{}: a bf16 linear has no fused epilogues", name_));
    }
    return kc::DenseLinearBf16(dense_view_ != nullptr ? dense_view_ : dense_.data(), out_, in_, x, rows, y, stream);
  }
  // The opt-in Blackwell W4A4 GEMM takes every call past kMaxDecodeRows (the skinny rows too: its
  // tests pin that; whether 9..64 rows should rather take the W4A16 skinny kernel is open).
  if (has_w4a4() && rows > kc::kMaxDecodeRows) {
    const kc::Nvfp4W4A4LinearDevice w{w4a4_codes_.data(), w4a4_scales_.data(), global_scale_, input_global_scale_, out_, in_,
                                      row_global_scales_.size() > 0 ? row_global_scales_.data() : nullptr};
    return kc::Nvfp4W4A4Linear(w, x, rows, y, workspace, stream, epilogue);
  }
  // Up to kMaxDecodeRows rows the decode GEMV, then the skinny kernel where TakesSkinny (both one
  // pass over the weights), else the tensor-core GEMM.
  if (kind_ == CudaLinearKind::kNvfp4) {
    const kc::Nvfp4LinearDevice w{codes_.data(), group_scales_.data(), global_scale_, out_, in_,
                                  row_global_scales_.size() > 0 ? row_global_scales_.data() : nullptr};
    if (rows <= kc::kMaxDecodeRows) return kc::Nvfp4DecodeLinear(w, x, rows, y, workspace, stream, epilogue);
    if (TakesSkinny(rows, out_)) return kc::Nvfp4SkinnyLinear(w, x, rows, y, workspace, stream, epilogue);
    return kc::Nvfp4GemmLinear(w, x, rows, y, workspace, stream, epilogue);
  }
  const kc::Fp8LinearDevice w{codes_.data(), channel_scales_.data(), out_, in_};
  if (rows <= kc::kMaxDecodeRows) return kc::Fp8DecodeLinear(w, x, rows, y, workspace, stream, epilogue);
  if (TakesSkinny(rows, out_)) return kc::Fp8SkinnyLinear(w, x, rows, y, workspace, stream, epilogue);
  return kc::Fp8GemmLinear(w, x, rows, y, workspace, stream, epilogue);
}

}  // namespace sparkserve::model::cuda
