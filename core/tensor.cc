// Tensor memory, views and conversions.
#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "core/half.h"

#if defined(SPARKSERVE_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace sparkserve::core {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

namespace {
std::shared_ptr<Buffer> AllocateCpu(size_t bytes) {
  const size_t rounded = ((bytes + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return std::make_shared<Buffer>(p, bytes, Device::Cpu(), std::move(owner));
}
}  // namespace

Tensor Tensor::Empty(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.buffer_ = AllocateCpu(t.nbytes());
  return t;
}

Tensor Tensor::Zeros(Shape shape, DType dtype) {
  Tensor t = Empty(std::move(shape), dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

absl::StatusOr<Tensor> Tensor::Allocate(Shape shape, DType dtype, Device device) {
  if (device.is_cpu()) return Empty(std::move(shape), dtype);
#if defined(SPARKSERVE_WITH_CUDA)
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  const size_t bytes = t.nbytes();
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t err = cudaSetDevice(device.index);
  void* p = nullptr;
  if (err == cudaSuccess) err = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  cudaSetDevice(prev);
  if (err != cudaSuccess) {
    return absl::ResourceExhaustedError(fmt::format("cudaMalloc of {} bytes on {} failed: {}", bytes, device.ToString(),
                                                       cudaGetErrorString(err)));
  }
  std::shared_ptr<void> owner(p, [](void* q) { cudaFree(q); });
  t.buffer_ = std::make_shared<Buffer>(p, bytes, device, std::move(owner));
  return t;
#else
  return absl::FailedPreconditionError("CUDA tensors need a build with the CUDA backend");
#endif
}

Tensor Tensor::Borrow(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.buffer_ = std::make_shared<Buffer>(data, t.nbytes(), device, std::move(keep_alive));
  return t;
}

Tensor Tensor::FromF32(Shape shape, std::span<const float> values) {
  Tensor t = Empty(std::move(shape), DType::kF32);
  std::memcpy(t.raw_data(), values.data(), std::min(t.nbytes(), values.size_bytes()));
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("reshape: more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0) {
      return absl::InvalidArgumentError(fmt::format("reshape {} -> {}", ShapeToString(shape_), ShapeToString(shape)));
    }
    shape[infer] = numel() / known;
  }
  if (NumElements(shape) != numel()) {
    return absl::InvalidArgumentError(fmt::format("reshape {} -> {}", ShapeToString(shape_), ShapeToString(shape)));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  Tensor t = *this;
  const int64_t row = shape_.empty() ? 1 : numel() / std::max<int64_t>(shape_[0], 1);
  t.shape_[0] = end - begin;
  t.offset_ += static_cast<size_t>(begin * row) * DTypeSize(dtype_);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Empty(shape_, dtype_);
  std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

std::string Tensor::ToString() const {
  return fmt::format("{}{} {}", DTypeName(dtype_), ShapeToString(shape_), device().ToString());
}

absl::StatusOr<Tensor> ToF32(const Tensor& t) {
  if (!t.device().is_cpu()) return absl::InvalidArgumentError("ToF32 needs a CPU tensor");
  Tensor out = Tensor::Empty(t.shape(), DType::kF32);
  float* dst = out.data<float>();
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kF32: std::memcpy(dst, t.raw_data(), t.nbytes()); break;
    case DType::kBF16: {
      const uint16_t* src = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* src = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
      break;
    }
    default:
      return absl::InvalidArgumentError(fmt::format("ToF32: unsupported dtype {}", DTypeName(t.dtype())));
  }
  return out;
}

}  // namespace sparkserve::core
