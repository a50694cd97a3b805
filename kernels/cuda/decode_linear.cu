// Decode GEMV on tensor cores. Each warp computes a 16-row tile of W against up to 8 activation
// rows (mma.m16n8k16: A = dequantised weights, B = activations, fp32 accumulators) over one K
// split; a second kernel sums the splits, applies the per-tensor/per-channel scale and the linear's
// epilogue (store, SwiGLU, or residual add + RMSNorm: decode_linear.h).
//
// Lane layout (lane = 4 * q + t): rows q and q + 8 of the tile, activation row q, and within every
// 16-element K group the 4 contiguous elements 4t..4t+3 (mma k-slots 2t, 2t+1, 2t+8, 2t+9; any
// fixed permutation of K works when A and B agree). Weights are repacked at load tile-major
// (decode_linear.h), so a warp's loads of one K step are 2 x 512 contiguous bytes and a tile's
// steps follow each other in memory.
#include "kernels/cuda/decode_linear_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kUnroll = 4;  // K steps whose loads a lane issues together

__device__ __forceinline__ void MmaF16F32(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Nibbles E and E+4 of `u` (E2M1 codes) as fp16x2 holding value * 2^-14, exactly: the 3 magnitude
// bits land on fp16's two low exponent bits and top mantissa bit, the sign on bit 15.
template <int E>
__device__ __forceinline__ uint32_t E2m1PairScaledDown(uint32_t u) {
  constexpr int kMagShift = 9 - 4 * E;
  constexpr int kSignShift = 12 - 4 * E;
  uint32_t mag;
  if constexpr (kMagShift >= 0) {
    mag = u << kMagShift;
  } else {
    mag = u >> (-kMagShift);
  }
  return (mag & 0x0E000E00u) | ((u << kSignShift) & 0x80008000u);
}

__device__ __forceinline__ float2 E4m3PairToFloat2(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(h));
}

__device__ __forceinline__ uint32_t E4m3PairToHalf2Bits(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Copies the block's K range of the activations into shared memory: xs[r][k - k0], r < rows.
__device__ __forceinline__ void StageActivations(const __half* __restrict__ x, int rows, int in, int k0, int klen,
                                                 __half* xs) {
  const int vecs = klen / 8;  // 16-byte vectors per row
  for (int i = threadIdx.x; i < rows * vecs; i += blockDim.x) {
    const int r = i / vecs, v = i % vecs;
    reinterpret_cast<uint4*>(xs + r * klen)[v] =
        __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(r) * in + k0) + v);
  }
  __syncthreads();
}

// Writes a warp's accumulators: acc[i] is row (i < 2 ? a : b) of the tile, activation row 2t + i%2.
__device__ __forceinline__ void StorePartial(const float acc[4], int tile, int q, int t, int rows, int out,
                                             float* __restrict__ p) {
  const int row_a = tile * 16 + q, row_b = row_a + 8;
  const int n0 = 2 * t, n1 = 2 * t + 1;
  if (n0 < rows) {
    if (row_a < out) p[static_cast<size_t>(n0) * out + row_a] = acc[0];
    if (row_b < out) p[static_cast<size_t>(n0) * out + row_b] = acc[2];
  }
  if (n1 < rows) {
    if (row_a < out) p[static_cast<size_t>(n1) * out + row_a] = acc[1];
    if (row_b < out) p[static_cast<size_t>(n1) * out + row_b] = acc[3];
  }
}

// grid: (ceil(tiles / warps_per_block), num_splits); dynamic shared memory: rows * klen fp16.
__global__ void __launch_bounds__(kDecodeWarpsPerBlock * 32)
    Nvfp4DecodeKernel(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                      const __half* __restrict__ x, int rows, int out, int in, int tiles, int steps_per_split,
                      float* __restrict__ partial) {
  extern __shared__ __align__(16) __half xs[];
  const int steps = in / kNvfp4Step;
  const int s0 = blockIdx.y * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const int tile = blockIdx.x * kDecodeWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int klen = (s1 - s0) * kNvfp4Step;
  const uint8_t* wt = packed + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 1024 + 16 * lane;
  const uint8_t* st = scales + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 128 + 16 * q;
  // K steps s_base.. (clamped to the split) into registers.
  uint4 qa[kUnroll], qb[kUnroll], sc[kUnroll];
  auto load_steps = [&](int s_base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = min(s_base + u, s1 - 1);
      qa[u] = LoadStreaming(wt + 1024 * s);
      qb[u] = LoadStreaming(wt + 1024 * s + 512);
      sc[u] = __ldg(reinterpret_cast<const uint4*>(st + 128 * s));
    }
  };
  load_steps(s0);  // the first weights (no earlier kernel writes them) load while the previous kernel finishes
  WaitForPriorGrids();
  AllowNextGrid();
  StageActivations(x, rows, in, s0 * kNvfp4Step, (s1 - s0) * kNvfp4Step, xs);
  if (tile >= tiles) return;
  // Activation row q (zeros beyond `rows`): this lane's 4 elements of each 16-group.
  const __half* xl = xs + min(q, rows - 1) * klen + 4 * t;
  const bool has_x = q < rows;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s_base = s0; s_base < s1; s_base += kUnroll) {
    if (s_base != s0) load_steps(s_base);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s_base + u >= s1) break;
      const uint32_t words_a[4] = {qa[u].x, qa[u].y, qa[u].z, qa[u].w};
      const uint32_t words_b[4] = {qb[u].x, qb[u].y, qb[u].z, qb[u].w};
      const uint32_t scale_a[2] = {sc[u].x, sc[u].y};  // row a's 8 group scales
      const uint32_t scale_b[2] = {sc[u].z, sc[u].w};  // row b's
      const __half* xk = xl + kNvfp4Step * (s_base + u - s0);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        // Word w holds groups 2w (nibbles 0,4,1,5) and 2w+1 (nibbles 2,6,3,7).
        const float2 ga = E4m3PairToFloat2(scale_a[w / 2] >> (16 * (w % 2)));
        const float2 gb = E4m3PairToFloat2(scale_b[w / 2] >> (16 * (w % 2)));
        uint2 x0 = *reinterpret_cast<const uint2*>(xk + 16 * (2 * w));
        uint2 x1 = *reinterpret_cast<const uint2*>(xk + 16 * (2 * w + 1));
        if (!has_x) x0 = x1 = make_uint2(0, 0);
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        MmaF16F32(c, E2m1PairScaledDown<0>(words_a[w]), E2m1PairScaledDown<0>(words_b[w]),
                  E2m1PairScaledDown<1>(words_a[w]), E2m1PairScaledDown<1>(words_b[w]), x0.x, x0.y);
        acc[0] = fmaf(c[0], ga.x, acc[0]);
        acc[1] = fmaf(c[1], ga.x, acc[1]);
        acc[2] = fmaf(c[2], gb.x, acc[2]);
        acc[3] = fmaf(c[3], gb.x, acc[3]);
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        MmaF16F32(d, E2m1PairScaledDown<2>(words_a[w]), E2m1PairScaledDown<2>(words_b[w]),
                  E2m1PairScaledDown<3>(words_a[w]), E2m1PairScaledDown<3>(words_b[w]), x1.x, x1.y);
        acc[0] = fmaf(d[0], ga.y, acc[0]);
        acc[1] = fmaf(d[1], ga.y, acc[1]);
        acc[2] = fmaf(d[2], gb.y, acc[2]);
        acc[3] = fmaf(d[3], gb.y, acc[3]);
      }
    }
  }
  StorePartial(acc, tile, q, t, rows, out, partial + static_cast<size_t>(blockIdx.y) * rows * out);
}

__global__ void __launch_bounds__(kDecodeWarpsPerBlock * 32)
    Fp8DecodeKernel(const uint8_t* __restrict__ weight, const __half* __restrict__ x, int rows, int out, int in,
                    int tiles, int steps_per_split, float* __restrict__ partial) {
  extern __shared__ __align__(16) __half xs[];
  const int steps = in / kFp8Step;
  const int s0 = blockIdx.y * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const int tile = blockIdx.x * kDecodeWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int klen = (s1 - s0) * kFp8Step;
  const uint8_t* wt = weight + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 1024 + 16 * lane;
  uint4 qa[kUnroll], qb[kUnroll];
  auto load_steps = [&](int s_base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int s = min(s_base + u, s1 - 1);
      qa[u] = LoadStreaming(wt + 1024 * s);
      qb[u] = LoadStreaming(wt + 1024 * s + 512);
    }
  };
  load_steps(s0);  // while the previous kernel finishes (see the NVFP4 kernel)
  WaitForPriorGrids();
  AllowNextGrid();
  StageActivations(x, rows, in, s0 * kFp8Step, (s1 - s0) * kFp8Step, xs);
  if (tile >= tiles) return;
  const __half* xl = xs + min(q, rows - 1) * klen + 4 * t;
  const bool has_x = q < rows;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s_base = s0; s_base < s1; s_base += kUnroll) {
    if (s_base != s0) load_steps(s_base);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (s_base + u >= s1) break;
      const uint32_t words_a[4] = {qa[u].x, qa[u].y, qa[u].z, qa[u].w};
      const uint32_t words_b[4] = {qb[u].x, qb[u].y, qb[u].z, qb[u].w};
      const __half* xk = xl + kFp8Step * (s_base + u - s0);
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        uint2 xv = *reinterpret_cast<const uint2*>(xk + 16 * g);
        if (!has_x) xv = make_uint2(0, 0);
        MmaF16F32(acc, E4m3PairToHalf2Bits(words_a[g]), E4m3PairToHalf2Bits(words_b[g]),
                  E4m3PairToHalf2Bits(words_a[g] >> 16), E4m3PairToHalf2Bits(words_b[g] >> 16), xv.x, xv.y);
      }
    }
  }
  StorePartial(acc, tile, q, t, rows, out, partial + static_cast<size_t>(blockIdx.y) * rows * out);
}

template <typename Kernel>
cudaError_t AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

}  // namespace

// Enough warps to keep every SM's loads in flight (~16 warps a SM), at least 2 steps a warp.
SplitPlan PlanSplits(int out, int steps) {
  SplitPlan p;
  p.tiles = (out + 15) / 16;
  p.steps = steps;
  const int target_warps = MultiprocessorCount() * 16;
  const int splits = std::clamp((target_warps + p.tiles - 1) / p.tiles, 1, std::max(1, steps / 2));
  p.steps_per_split = (steps + splits - 1) / splits;
  p.num_splits = (steps + p.steps_per_split - 1) / p.steps_per_split;
  return p;
}

cudaError_t LaunchNvfp4Decode(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              const DecodeEpilogue& epilogue, cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kNvfp4Step);
  const size_t smem = static_cast<size_t>(rows) * p.steps_per_split * kNvfp4Step * sizeof(__half);
  cudaError_t err = AllowSharedMemory(Nvfp4DecodeKernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.tiles + kDecodeWarpsPerBlock - 1) / kDecodeWarpsPerBlock, p.num_splits);
  LaunchStepKernel(Nvfp4DecodeKernel, dim3(grid), dim3(kDecodeWarpsPerBlock * 32), smem, stream, w.packed, w.scales, x,
                   rows, w.out, w.in, p.tiles, p.steps_per_split, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // The kernel's weights carry a 2^-14 factor (see E2m1PairScaledDown); the global scale divides.
  const SplitSum sum{partial, p.num_splits, rows, w.out, w.row_global_scales ? 16384.0f : 16384.0f / w.global_scale,
                     nullptr, w.row_global_scales};
  return LaunchLinearEpilogue(sum, y, epilogue, stream);
}

cudaError_t LaunchFp8Decode(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            const DecodeEpilogue& epilogue, cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kFp8Step);
  const size_t smem = static_cast<size_t>(rows) * p.steps_per_split * kFp8Step * sizeof(__half);
  cudaError_t err = AllowSharedMemory(Fp8DecodeKernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.tiles + kDecodeWarpsPerBlock - 1) / kDecodeWarpsPerBlock, p.num_splits);
  LaunchStepKernel(Fp8DecodeKernel, dim3(grid), dim3(kDecodeWarpsPerBlock * 32), smem, stream, w.weight, x, rows, w.out,
                   w.in, p.tiles, p.steps_per_split, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const SplitSum sum{partial, p.num_splits, rows, w.out, 1.0f, w.scales, nullptr};
  return LaunchLinearEpilogue(sum, y, epilogue, stream);
}

}  // namespace sparkserve::kernels::cuda
