// Device names and CUDA discovery. The CUDA runtime is linked statically and loads the driver
// (libcuda.so.1) itself at first use, so a binary built with CUDA still starts without a driver.
#include "core/device.h"

#include <vector>

#include <charconv>

#include "fmt/format.h"

#if defined(SPARKSERVE_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace sparkserve::core {

std::string Device::ToString() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index);
}

absl::StatusOr<Device> ParseDevice(std::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  if (text.substr(0, 5) == "cuda:") {
    int i = 0;
    const std::string_view digits = text.substr(5);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && i >= 0) return Device::Cuda(i);
  }
  return absl::InvalidArgumentError(fmt::format("unknown device '{}' (expected cpu, cuda or cuda:N)", text));
}

bool CudaCompiledIn() {
#if defined(SPARKSERVE_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::vector<CudaDeviceInfo>> ListCudaDevices() {
#if defined(SPARKSERVE_WITH_CUDA)
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(fmt::format(
        "no usable CUDA device: {} (is the NVIDIA driver installed and a GPU visible? use --backend cpu to run "
        "without one)", cudaGetErrorString(err)));
  }
  if (count == 0) return absl::FailedPreconditionError("no CUDA device is visible (use --backend cpu)");
  std::vector<CudaDeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      return absl::InternalError(fmt::format("cudaGetDeviceProperties({}): {}", i, cudaGetErrorString(err)));
    }
    out.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem, prop.multiProcessorCount});
  }
  return out;
#else
  return absl::FailedPreconditionError(
      "this sparkserve binary was built without the CUDA backend (rebuild with ./deploy/build.sh --cuda, or use --backend cpu)");
#endif
}

}  // namespace sparkserve::core
