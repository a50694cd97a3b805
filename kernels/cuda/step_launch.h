// Programmatic dependent launch (sm_90+) for the kernels of a model step: each is launched so that
// it may start while its predecessor drains (hiding the launch gap and the ramp of ~500 small
// kernels a decode step runs), and calls WaitForPriorGrids() before it reads anything an earlier
// kernel wrote (work that reads only weights may run before it), then AllowNextGrid() to let its
// successor launch. Every kernel in kernels/cuda does both; launched plainly, both are no-ops.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

namespace sparkserve::kernels::cuda {

__device__ __forceinline__ void WaitForPriorGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void AllowNextGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialisation; with
// cluster_x >= 1, blocks also form thread-block clusters of cluster_x along x (grid.x a multiple of
// it; 0: no cluster attribute).
template <typename... Params, typename... Args>
cudaError_t LaunchStepKernelInClusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                                       cudaStream_t stream, unsigned cluster_x, Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster_x;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = cluster_x > 0 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

template <typename... Params, typename... Args>
cudaError_t LaunchStepKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                             Args&&... args) {
  return LaunchStepKernelInClusters(kernel, grid, block, smem, stream, 0u, std::forward<Args>(args)...);
}

// Lets `kernel` use `bytes` of dynamic shared memory (past 48 KB it must opt in), set once per device
// (devices 0..63 remembered; others set it every call). One static per kernel instantiation.
template <auto kernel>
cudaError_t AllowDynamicSharedMemory(int bytes) {
  static std::atomic<uint64_t> allowed{0};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (allowed.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) allowed.fetch_or(bit, std::memory_order_acq_rel);
  return err;
}

}  // namespace sparkserve::kernels::cuda
