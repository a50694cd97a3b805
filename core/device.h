// Devices (cpu, cuda:N) and run-time discovery of the CUDA driver.
#pragma once
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sparkserve::core {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device Cpu() { return {DeviceKind::kCpu, 0}; }
  static Device Cuda(int i = 0) { return {DeviceKind::kCuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device&) const = default;
  std::string ToString() const;  // "cpu" or "cuda:N"
};

// Parses "cpu", "cuda" or "cuda:N".
absl::StatusOr<Device> ParseDevice(std::string_view text);

// True when this binary was compiled with the CUDA backend.
bool CudaCompiledIn();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;   // compute capability
  size_t total_memory = 0;    // bytes
  int multiprocessors = 0;
};

// The visible CUDA devices; a clear error when the build has no CUDA, no driver is installed, or no
// GPU is visible. Never crashes on a machine without a GPU.
absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices();

}  // namespace sparkserve::core
