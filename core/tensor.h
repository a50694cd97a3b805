// Tensor: a dense, row-major (contiguous) n-d array of one dtype on one device, owning its memory
// or borrowing it (an mmap'd file, a caller's buffer) with a keep-alive handle. Views share memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "core/dtype.h"

namespace sparkserve::core {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2, 3]"

// A block of memory on a device. Owned blocks free themselves; borrowed ones hold `keep_alive`.
class Buffer {
 public:
  Buffer(void* data, size_t bytes, Device device, std::shared_ptr<void> keep_alive)
      : data_(data), bytes_(bytes), device_(device), keep_alive_(std::move(keep_alive)) {}
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::shared_ptr<void> keep_alive_;  // owns or pins the memory
};

class Tensor {
 public:
  Tensor() = default;

  // New zero-filled CPU tensor (64-byte aligned).
  static Tensor Zeros(Shape shape, DType dtype);
  // New CPU tensor with unspecified contents.
  static Tensor Empty(Shape shape, DType dtype);
  // New tensor on any device (CUDA memory needs a CUDA build and a GPU).
  static absl::StatusOr<Tensor> Allocate(Shape shape, DType dtype, Device device);
  // Borrows `data`; `keep_alive` (may be null) is held as long as any view lives.
  static Tensor Borrow(void* data, Shape shape, DType dtype, Device device,
                       std::shared_ptr<void> keep_alive);
  // A CPU f32 tensor holding a copy of `values`.
  static Tensor FromF32(Shape shape, std::span<const float> values);

  bool defined() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  Device device() const { return buffer_ ? buffer_->device() : Device::Cpu(); }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }

  void* raw_data() const { return static_cast<char*>(buffer_->data()) + offset_; }
  // Typed access; the caller states the element type it expects (not checked: see dtype()).
  template <typename T>
  T* data() const { return static_cast<T*>(raw_data()); }
  template <typename T>
  std::span<T> span() const { return {data<T>(), static_cast<size_t>(numel())}; }
  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(raw_data()), nbytes()}; }

  // Same memory, new shape with the same element count (one dimension may be -1).
  absl::StatusOr<Tensor> Reshape(Shape shape) const;
  // Rows [begin, end) of the first dimension, sharing memory.
  Tensor Slice(int64_t begin, int64_t end) const;
  // Deep copy on the CPU (the tensor must be on the CPU).
  Tensor Clone() const;
  std::string ToString() const;  // "bf16[2, 3] cpu"

 private:
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;  // bytes into the buffer
  Shape shape_;
  DType dtype_ = DType::kF32;
};

// Converts a CPU floating tensor (f32/bf16/f16) to a new f32 tensor.
absl::StatusOr<Tensor> ToF32(const Tensor& t);

}  // namespace sparkserve::core
