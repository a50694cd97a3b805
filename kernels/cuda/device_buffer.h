// DeviceBuffer<T>: an owned cudaMalloc'd array (move-only), with blocking upload/download helpers
// for load-time setup and tests. Not for use inside a step (those copies are async on a stream).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/status.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::kernels::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  // `count` uninitialised elements.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t count) {
    DeviceBuffer b;
    if (count > 0) {
      void* p = nullptr;
      RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc"));
      b.data_ = static_cast<T*>(p);
    }
    b.size_ = count;
    return b;
  }
  // `count` zero bytes.
  static absl::StatusOr<DeviceBuffer> Zeros(size_t count) {
    ASSIGN_OR_RETURN(DeviceBuffer b, Allocate(count));
    if (count > 0) RETURN_IF_ERROR(CudaStatus(cudaMemset(b.data_, 0, count * sizeof(T)), "cudaMemset"));
    return b;
  }
  static absl::StatusOr<DeviceBuffer> FromHost(std::span<const T> host) {
    ASSIGN_OR_RETURN(DeviceBuffer b, Allocate(host.size()));
    RETURN_IF_ERROR(b.Upload(host));
    return b;
  }
  absl::Status Upload(std::span<const T> host) {
    if (host.size() > size_) return absl::InvalidArgumentError("DeviceBuffer::Upload: more elements than the buffer");
    if (host.empty()) return absl::OkStatus();
    return CudaStatus(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  absl::StatusOr<std::vector<T>> Download() const {
    std::vector<T> host(size_);
    if (size_ > 0) {
      RETURN_IF_ERROR(CudaStatus(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H"));
    }
    return host;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Reset() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sparkserve::kernels::cuda
