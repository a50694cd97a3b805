// Decode GEMV on tensor cores. Each warp computes a 16-row tile of W against up to 8 activation
// rows (mma.m16n8k16: A = dequantised weights, B = activations, fp32 accumulators) over one K
// split, and writes fp32 partials that the linear epilogue (linear_epilogue_kernels.h) sums, scales
// and finishes (store, SwiGLU, or residual add + RMSNorm: decode_linear.h).
//
// Lane layout (lane = 4 * q + t): rows q and q + 8 of the tile, activation row q, and within every
// 16-element K group the 4 contiguous elements 4t..4t+3 (mma k-slots 2t, 2t+1, 2t+8, 2t+9; any
// fixed permutation of K works when A and B agree). Weights are repacked at load tile-major
// (decode_linear.h, decode_layout.cuh), so a warp's loads of one K step are 2 x 512 contiguous bytes
// and a tile's steps follow each other in memory. Each lane streams its own 16-byte pieces of the
// next K steps into a ring in shared memory with cp.async (kStages - 1 steps in flight, no registers
// held), so the loads of later steps overlap the unpacking and mma of the current one.
#include "kernels/cuda/decode_layout.cuh"
#include "kernels/cuda/decode_linear_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kNvfp4Stages = 4;  // ring slots a lane cycles through (kStages - 1 K steps in flight)
constexpr int kFp8Stages = 6;
constexpr int kNvfp4SlotVecs = 3;  // 16-byte pieces of a lane a K step: row q codes, row q + 8 codes, scales
constexpr int kFp8SlotVecs = 2;

// Shared memory of a decode block: the warps' rings, then the staged activations.
__host__ __device__ constexpr size_t RingBytes(int stages, int vecs) {
  return static_cast<size_t>(kDecodeWarpsPerBlock) * stages * vecs * 32 * 16;
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

// grid: (ceil(tiles / warps_per_block), num_splits); dynamic shared memory: the rings, then rows * klen fp16.
__global__ void __launch_bounds__(kDecodeWarpsPerBlock * 32)
    Nvfp4DecodeKernel(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                      const __half* __restrict__ x, int rows, int out, int in, int tiles, int steps_per_split,
                      float* __restrict__ partial) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int steps = in / kNvfp4Step;
  const int s0 = blockIdx.y * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int tile = blockIdx.x * kDecodeWarpsPerBlock + warp;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int klen = (s1 - s0) * kNvfp4Step;
  const bool active = tile < tiles;
  // This lane's slots: ring[(slot * 3 + piece) * 32] (16 bytes each; lanes side by side).
  uint4* ring = reinterpret_cast<uint4*>(smem) + warp * kNvfp4Stages * kNvfp4SlotVecs * 32 + lane;
  __half* xs = reinterpret_cast<__half*>(smem + RingBytes(kNvfp4Stages, kNvfp4SlotVecs));
  const uint8_t* wt = packed + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 1024 + 16 * lane;
  const uint8_t* st = scales + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 128 + 16 * q;
  auto issue = [&](int s, int slot) {  // K step s into `slot`; one commit group a call, empty past the split
    if (active && s < s1) {
      CpAsync16(ring + (slot * kNvfp4SlotVecs + 0) * 32, wt + 1024 * s);
      CpAsync16(ring + (slot * kNvfp4SlotVecs + 1) * 32, wt + 1024 * s + 512);
      CpAsync16(ring + (slot * kNvfp4SlotVecs + 2) * 32, st + 128 * s);
    }
    CpAsyncCommit();
  };
  // The first weights (no earlier kernel writes them) stream in while the previous kernel finishes.
#pragma unroll
  for (int i = 0; i < kNvfp4Stages - 1; ++i) issue(s0 + i, i);
  WaitForPriorGrids();
  AllowNextGrid();
  StageActivations(x, rows, in, s0 * kNvfp4Step, klen, xs);
  if (!active) return;  // issued no copies
  // Activation row q: this lane's 4 elements of each 16-group. Lanes with q >= rows read row rows - 1:
  // mma column q then only feeds accumulator column q, which StorePartial drops.
  const __half* xl = xs + min(q, rows - 1) * klen + 4 * t;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int slot = 0;
  for (int s = s0; s < s1; ++s) {
    CpAsyncWait<kNvfp4Stages - 2>();  // step s has landed
    const uint4 qa = ring[(slot * kNvfp4SlotVecs + 0) * 32];
    const uint4 qb = ring[(slot * kNvfp4SlotVecs + 1) * 32];
    const uint4 sc = ring[(slot * kNvfp4SlotVecs + 2) * 32];
    issue(s + kNvfp4Stages - 1, slot == 0 ? kNvfp4Stages - 1 : slot - 1);  // the slot read last step
    slot = slot + 1 == kNvfp4Stages ? 0 : slot + 1;
    const uint32_t words_a[4] = {qa.x, qa.y, qa.z, qa.w};
    const uint32_t words_b[4] = {qb.x, qb.y, qb.z, qb.w};
    const uint32_t scale_a[2] = {sc.x, sc.y};  // row a's 8 group scales
    const uint32_t scale_b[2] = {sc.z, sc.w};  // row b's
    const __half* xk = xl + kNvfp4Step * (s - s0);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      // Word w holds groups 2w (pairs 0, 1) and 2w + 1 (pairs 2, 3).
      const float2 ga = E4m3PairToFloat2(scale_a[w / 2] >> (16 * (w % 2)));
      const float2 gb = E4m3PairToFloat2(scale_b[w / 2] >> (16 * (w % 2)));
      const uint2 x0 = *reinterpret_cast<const uint2*>(xk + 16 * (2 * w));
      const uint2 x1 = *reinterpret_cast<const uint2*>(xk + 16 * (2 * w + 1));
      float c[4];
      MmaF16F32Fresh(c, E2m1PairScaledDown<0>(words_a[w]), E2m1PairScaledDown<0>(words_b[w]),
                E2m1PairScaledDown<1>(words_a[w]), E2m1PairScaledDown<1>(words_b[w]), x0.x, x0.y);
      acc[0] = fmaf(c[0], ga.x, acc[0]);
      acc[1] = fmaf(c[1], ga.x, acc[1]);
      acc[2] = fmaf(c[2], gb.x, acc[2]);
      acc[3] = fmaf(c[3], gb.x, acc[3]);
      float d[4];
      MmaF16F32Fresh(d, E2m1PairScaledDown<2>(words_a[w]), E2m1PairScaledDown<2>(words_b[w]),
                E2m1PairScaledDown<3>(words_a[w]), E2m1PairScaledDown<3>(words_b[w]), x1.x, x1.y);
      acc[0] = fmaf(d[0], ga.y, acc[0]);
      acc[1] = fmaf(d[1], ga.y, acc[1]);
      acc[2] = fmaf(d[2], gb.y, acc[2]);
      acc[3] = fmaf(d[3], gb.y, acc[3]);
    }
  }
  StorePartial(acc, tile, q, t, rows, out, partial + static_cast<size_t>(blockIdx.y) * rows * out);
}

__global__ void __launch_bounds__(kDecodeWarpsPerBlock * 32)
    Fp8DecodeKernel(const uint8_t* __restrict__ weight, const __half* __restrict__ x, int rows, int out, int in,
                    int tiles, int steps_per_split, float* __restrict__ partial) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int steps = in / kFp8Step;
  const int s0 = blockIdx.y * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int tile = blockIdx.x * kDecodeWarpsPerBlock + warp;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int klen = (s1 - s0) * kFp8Step;
  const bool active = tile < tiles;
  uint4* ring = reinterpret_cast<uint4*>(smem) + warp * kFp8Stages * kFp8SlotVecs * 32 + lane;
  __half* xs = reinterpret_cast<__half*>(smem + RingBytes(kFp8Stages, kFp8SlotVecs));
  const uint8_t* wt = weight + (static_cast<size_t>(min(tile, tiles - 1)) * steps) * 1024 + 16 * lane;
  auto issue = [&](int s, int slot) {
    if (active && s < s1) {
      CpAsync16(ring + (slot * kFp8SlotVecs + 0) * 32, wt + 1024 * s);
      CpAsync16(ring + (slot * kFp8SlotVecs + 1) * 32, wt + 1024 * s + 512);
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int i = 0; i < kFp8Stages - 1; ++i) issue(s0 + i, i);  // while the previous kernel finishes
  WaitForPriorGrids();
  AllowNextGrid();
  StageActivations(x, rows, in, s0 * kFp8Step, klen, xs);
  if (!active) return;
  const __half* xl = xs + min(q, rows - 1) * klen + 4 * t;  // as in the NVFP4 kernel

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int slot = 0;
  for (int s = s0; s < s1; ++s) {
    CpAsyncWait<kFp8Stages - 2>();
    const uint4 qa = ring[(slot * kFp8SlotVecs + 0) * 32];
    const uint4 qb = ring[(slot * kFp8SlotVecs + 1) * 32];
    issue(s + kFp8Stages - 1, slot == 0 ? kFp8Stages - 1 : slot - 1);
    slot = slot + 1 == kFp8Stages ? 0 : slot + 1;
    const uint32_t words_a[4] = {qa.x, qa.y, qa.z, qa.w};
    const uint32_t words_b[4] = {qb.x, qb.y, qb.z, qb.w};
    const __half* xk = xl + kFp8Step * (s - s0);
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const uint2 xv = *reinterpret_cast<const uint2*>(xk + 16 * g);
      MmaF16F32(acc, E4m3PairToHalf2Bits(words_a[g]), E4m3PairToHalf2Bits(words_b[g]),
                E4m3PairToHalf2Bits(words_a[g] >> 16), E4m3PairToHalf2Bits(words_b[g] >> 16), xv.x, xv.y);
    }
  }
  StorePartial(acc, tile, q, t, rows, out, partial + static_cast<size_t>(blockIdx.y) * rows * out);
}

template <typename Kernel>
cudaError_t AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// Warps a decode linear aims to put on each SM (SPARKSERVE_DECODE_WARPS_PER_SM overrides, for tuning).
int DecodeWarpsPerSm() {
  static const int n = [] {
    const char* v = std::getenv("SPARKSERVE_DECODE_WARPS_PER_SM");
    const int parsed = v != nullptr ? std::atoi(v) : 0;
    return parsed >= 1 && parsed <= 64 ? parsed : 16;  // 16 measured best on the H200 (bench/RESULTS.md)
  }();
  return n;
}

}  // namespace

// Enough warps to keep every SM busy (DecodeWarpsPerSm), at least 2 steps a warp.
SplitPlan PlanSplits(int out, int steps) {
  SplitPlan p;
  p.tiles = (out + 15) / 16;
  p.steps = steps;
  const int target_warps = MultiprocessorCount() * DecodeWarpsPerSm();
  const int splits = std::clamp((target_warps + p.tiles - 1) / p.tiles, 1, std::max(1, steps / 2));
  p.steps_per_split = (steps + splits - 1) / splits;
  p.num_splits = (steps + p.steps_per_split - 1) / p.steps_per_split;
  return p;
}

cudaError_t LaunchNvfp4Decode(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              const DecodeEpilogue& epilogue, cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kNvfp4Step);
  const size_t smem = RingBytes(kNvfp4Stages, kNvfp4SlotVecs) +
                      static_cast<size_t>(rows) * p.steps_per_split * kNvfp4Step * sizeof(__half);
  cudaError_t err = AllowSharedMemory(Nvfp4DecodeKernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid((p.tiles + kDecodeWarpsPerBlock - 1) / kDecodeWarpsPerBlock, p.num_splits);
  LaunchStepKernel(Nvfp4DecodeKernel, dim3(grid), dim3(kDecodeWarpsPerBlock * 32), smem, stream, w.packed, w.scales, x,
                   rows, w.out, w.in, p.tiles, p.steps_per_split, partial);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const SplitSum sum{partial, p.num_splits, rows, w.out, Nvfp4SumScale(w), nullptr, w.row_global_scales};
  return LaunchLinearEpilogue(sum, y, epilogue, stream);
}

cudaError_t LaunchFp8Decode(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            const DecodeEpilogue& epilogue, cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kFp8Step);
  const size_t smem =
      RingBytes(kFp8Stages, kFp8SlotVecs) + static_cast<size_t>(rows) * p.steps_per_split * kFp8Step * sizeof(__half);
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
