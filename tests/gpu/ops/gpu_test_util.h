// Shared pieces of the GPU op tests: device buffers filled from host vectors, NaN-poisoned outputs,
// seeded random inputs, and the relative-error comparison every op test uses (NaN never passes).
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_buffer.h"

namespace sparkserve::gpu_test {

template <typename T>
using DeviceBuffer = kernels::cuda::DeviceBuffer<T>;

// Aborts the test on a failed status.
#define GPU_ASSERT_OK(expr)                                         \
  do {                                                              \
    auto s_ = (expr);                                               \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << std::string(s_.message()); \
  } while (0)

template <typename T>
DeviceBuffer<T> ToDevice(const std::vector<T>& host) {
  auto b = DeviceBuffer<T>::FromHost(host);
  EXPECT_TRUE(b.ok()) << std::string(b.status().message());
  return std::move(b).value();
}

// A float buffer of `count` NaNs: outputs start poisoned so an unwritten element fails the check.
inline DeviceBuffer<float> PoisonedF32(size_t count) {
  return ToDevice(std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()));
}

template <typename T>
std::vector<T> ToHost(const DeviceBuffer<T>& b) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto h = b.Download();
  EXPECT_TRUE(h.ok()) << std::string(h.status().message());
  return std::move(h).value();
}

inline std::vector<float> RandomF32(size_t count, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

// max |got - want| / max(max |want|, floor). Infinite when any got is NaN/inf or sizes differ.
inline double RelativeError(const std::vector<float>& got, const std::vector<float>& want, double floor = 1e-6) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double max_err = 0, max_ref = floor;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    max_err = std::max(max_err, std::abs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(want[i])));
  }
  return max_err / max_ref;
}

// Asserts RelativeError(got, want) <= tol with a message naming `what`.
#define EXPECT_CLOSE(got, want, tol, what)                                          \
  do {                                                                              \
    const double e_ = ::sparkserve::gpu_test::RelativeError((got), (want));         \
    EXPECT_LE(e_, (tol)) << (what) << ": relative error " << e_ << " (tolerance " << (tol) << ")"; \
  } while (0)

// True when a CUDA device is present; GPU tests fail (not skip) without one: the suite only runs
// where a GPU is expected.
inline bool HasCudaDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace sparkserve::gpu_test
