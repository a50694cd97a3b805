// Measures the device's copy bandwidth (bytes read + written per second), the denominator of every
// bandwidth floor we report.
#pragma once
#include <cstddef>

#include "absl/status/statusor.h"

namespace sparkserve::kernels::cuda {

struct CopyBandwidth {
  double bytes_per_second = 0;  // (read + written) / median time
  double median_seconds = 0;
  size_t buffer_bytes = 0;
};

// Times `repeats` device-to-device copies of `buffer_bytes` with CUDA events (after warm-up) and
// reports the median.
absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(size_t buffer_bytes = size_t{1} << 30, int repeats = 20);

}  // namespace sparkserve::kernels::cuda
