// The linear epilogue kernels (linear_epilogue_kernels.h): split sums + store, SwiGLU, or residual
// add + RMSNorm, each one launch over the linear's fp32 partials.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cooperative_groups.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

namespace sparkserve::kernels::cuda {
namespace {

// kStore: y[r, o]. Grid over rows * out.
__global__ void StoreSplitsKernel(const SplitSum sum, float* __restrict__ y) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(sum.rows) * sum.out) return;
  y[i] = sum(static_cast<int>(i / sum.out), static_cast<int>(i % sum.out));
}

// kSwiGlu: x_out[r, o] = silu(gate) * up for o < out / 2. Grid over rows * out / 2.
__global__ void SwiGluSplitsKernel(const SplitSum sum, __half* __restrict__ x_out) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int f = sum.out / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(sum.rows) * f) return;
  const int r = static_cast<int>(i / f), o = static_cast<int>(i % f);
  const float g = sum(r, o), u = sum(r, o + f);
  x_out[i] = ToHalfSaturated(Silu(g) * u);
}

// kAddRmsNorm over a cluster of kNormCluster blocks per row (one block alone was ~8 us of serial
// latency at batch 1): block c of row r adds the output to its slice of residual[r, :], the
// cluster sums the slices' sums of squares through distributed shared memory, and each block
// writes x_out for its slice.
constexpr int kNormCluster = 8;
constexpr int kNormThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
    AddRmsNormSplitsKernel(const SplitSum sum, float* __restrict__ residual, const float* __restrict__ w, float eps,
                           __half* __restrict__ x_out) {
  WaitForPriorGrids();
  AllowNextGrid();
  __shared__ float warp_sums[kNormThreads / 32];
  __shared__ float slice_sum;
  const cg::cluster_group cluster = cg::this_cluster();
  const int r = blockIdx.y, d = sum.out;
  const int per = (d + kNormCluster - 1) / kNormCluster;
  const int k0 = static_cast<int>(blockIdx.x) * per, k1 = min(d, k0 + per);
  float* res = residual + static_cast<size_t>(r) * d;
  float ss = 0.f;
  for (int k = k0 + threadIdx.x; k < k1; k += kNormThreads) {  // each element read and written by one thread
    const float v = res[k] + sum(r, k);
    res[k] = v;
    ss += v * v;
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kNormThreads / 32; ++i) s += warp_sums[i];
    slice_sum = s;
  }
  cluster.sync();  // every slice's sum is published
  float total = 0.f;
#pragma unroll
  for (int c = 0; c < kNormCluster; ++c) total += *cluster.map_shared_rank(&slice_sum, c);  // same order everywhere
  const float inv = rsqrtf(total / static_cast<float>(d) + eps);
  for (int k = k0 + threadIdx.x; k < k1; k += kNormThreads) {
    x_out[static_cast<size_t>(r) * d + k] = ToHalfSaturated(res[k] * inv * (1.0f + w[k]));
  }
  cluster.sync();  // no block leaves while another may still read its slice_sum
}

}  // namespace

cudaError_t LaunchLinearEpilogue(const SplitSum& sum, float* y, const DecodeEpilogue& e, cudaStream_t stream) {
  using K = DecodeEpilogue::Kind;
  if (e.kind == K::kAddRmsNorm) {
    return LaunchStepKernelInClusters(AddRmsNormSplitsKernel, dim3(kNormCluster, sum.rows), dim3(kNormThreads), 0,
                                      stream, kNormCluster, sum, e.residual, e.norm_weight, e.eps, e.x_out);
  }
  const int64_t n = static_cast<int64_t>(sum.rows) * (e.kind == K::kSwiGlu ? sum.out / 2 : sum.out);
  const dim3 grid(static_cast<unsigned>((n + 255) / 256));
  if (e.kind == K::kSwiGlu) return LaunchStepKernel(SwiGluSplitsKernel, grid, dim3(256), 0, stream, sum, e.x_out);
  return LaunchStepKernel(StoreSplitsKernel, grid, dim3(256), 0, stream, sum, y);
}


}  // namespace sparkserve::kernels::cuda
