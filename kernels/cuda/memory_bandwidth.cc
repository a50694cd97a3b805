// Copy-bandwidth probe: cudaMemcpyAsync device-to-device, timed with events, median of repeats.
#include "kernels/cuda/memory_bandwidth.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::kernels::cuda {

absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(size_t buffer_bytes, int repeats) {
  void* src = nullptr;
  void* dst = nullptr;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&src, buffer_bytes));
  absl::Status status = CudaStatus(cudaMalloc(&dst, buffer_bytes), "cudaMalloc");
  std::vector<float> times;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (status.ok()) status = CudaStatus(cudaEventCreate(&start), "cudaEventCreate");
  if (status.ok()) status = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate");
  if (status.ok()) status = CudaStatus(cudaMemset(src, 0x5a, buffer_bytes), "cudaMemset");
  for (int i = 0; status.ok() && i < repeats + 3; ++i) {
    status = CudaStatus(cudaEventRecord(start), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaMemcpyAsync(dst, src, buffer_bytes, cudaMemcpyDeviceToDevice), "copy");
    if (status.ok()) status = CudaStatus(cudaEventRecord(stop), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "copy");
    float ms = 0;
    if (status.ok()) status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i >= 3) times.push_back(ms);
  }
  if (start) (void)cudaEventDestroy(start);
  if (stop) (void)cudaEventDestroy(stop);
  (void)cudaFree(src);
  if (dst) (void)cudaFree(dst);
  RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  CopyBandwidth bw;
  bw.buffer_bytes = buffer_bytes;
  bw.median_seconds = times[times.size() / 2] * 1e-3;
  bw.bytes_per_second = 2.0 * static_cast<double>(buffer_bytes) / bw.median_seconds;
  return bw;
}

}  // namespace sparkserve::kernels::cuda
