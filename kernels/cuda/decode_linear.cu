// Decode GEMV on tensor cores. Each warp computes a 16-row tile of W against up to 8 activation
// rows (mma.m16n8k16: A = dequantised weights, B = activations, fp32 accumulators) over one K
// split; a second kernel sums the splits and applies the per-tensor/per-channel scale.
//
// Lane layout (lane = 4 * q + t): rows q and q + 8 of the tile, activation row q, and within every
// 16-element K group the 4 contiguous elements 4t..4t+3 (mma k-slots 2t, 2t+1, 2t+8, 2t+9; any
// fixed permutation of K works when A and B agree). Weights are repacked at load so each lane
// reads its elements of a K step with one 16-byte load per row.
#include "kernels/cuda/decode_linear_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;



__device__ __forceinline__ void MmaF16F32(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 LoadStreaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
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

int MultiprocessorCount() {
  static int count = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 132;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 132;
    return n > 0 ? n : 132;
  }();
  return count;
}

}  // namespace

// Enough warps to keep every SM's loads in flight (~16 warps a SM), at least 2 steps a warp.
SplitPlan PlanSplits(int out, int steps) {
  SplitPlan p;
  p.tiles = (out + 15) / 16;
  p.steps = steps;
  const int target_warps = MultiprocessorCount() * 16;
  int splits = std::clamp((target_warps + p.tiles - 1) / p.tiles, 1, std::max(1, steps / 2));
  p.steps_per_split = (steps + splits - 1) / splits;
  p.num_splits = (steps + p.steps_per_split - 1) / p.steps_per_split;
  return p;
}

namespace {

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Nvfp4DecodeKernel(const uint8_t* __restrict__ packed, const uint8_t* __restrict__ scales,
                      const __half* __restrict__ x, int rows, int out, int in, int tiles, int steps_per_split,
                      int num_splits, float* __restrict__ partial) {
  const int warp = blockIdx.x * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int tile = warp % tiles;
  const int split = warp / tiles;
  if (split >= num_splits) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int row_a = tile * 16 + q, row_b = row_a + 8;
  const int load_a = min(row_a, out - 1), load_b = min(row_b, out - 1);
  const int steps = in / kNvfp4Step;
  const int s0 = split * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const size_t row_bytes = static_cast<size_t>(in) / 2, scale_row_bytes = static_cast<size_t>(in) / 16;
  const uint8_t* wa = packed + load_a * row_bytes + 16 * t;
  const uint8_t* wb = packed + load_b * row_bytes + 16 * t;
  const uint8_t* sa_ptr = scales + load_a * scale_row_bytes;
  const uint8_t* sb_ptr = scales + load_b * scale_row_bytes;
  const bool has_x = q < rows;
  const __half* xq = x + static_cast<size_t>(has_x ? q : 0) * in + 4 * t;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = s0; s < s1; ++s) {
    const uint4 qa = LoadStreaming(wa + 64 * s);
    const uint4 qb = LoadStreaming(wb + 64 * s);
    const uint2 sa = __ldg(reinterpret_cast<const uint2*>(sa_ptr + 8 * s));
    const uint2 sb = __ldg(reinterpret_cast<const uint2*>(sb_ptr + 8 * s));
    const uint32_t words_a[4] = {qa.x, qa.y, qa.z, qa.w};
    const uint32_t words_b[4] = {qb.x, qb.y, qb.z, qb.w};
    const uint32_t scale_words_a[2] = {sa.x, sa.y};
    const uint32_t scale_words_b[2] = {sb.x, sb.y};
    const __half* xs = xq + kNvfp4Step * s;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      // Word w holds groups 2w (nibbles 0,4,1,5) and 2w+1 (nibbles 2,6,3,7).
      const float2 ga = E4m3PairToFloat2(scale_words_a[w / 2] >> (16 * (w % 2)));
      const float2 gb = E4m3PairToFloat2(scale_words_b[w / 2] >> (16 * (w % 2)));
      uint2 x0 = make_uint2(0, 0), x1 = make_uint2(0, 0);
      if (has_x) {
        x0 = __ldg(reinterpret_cast<const uint2*>(xs + 16 * (2 * w)));
        x1 = __ldg(reinterpret_cast<const uint2*>(xs + 16 * (2 * w + 1)));
      }
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
  // Accumulator (i): row (i < 2 ? row_a : row_b), activation row 2t + (i % 2).
  float* p = partial + static_cast<size_t>(split) * rows * out;
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

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Fp8DecodeKernel(const uint8_t* __restrict__ weight, const __half* __restrict__ x, int rows, int out, int in,
                    int tiles, int steps_per_split, int num_splits, float* __restrict__ partial) {
  const int warp = blockIdx.x * kWarpsPerBlock + static_cast<int>(threadIdx.x / 32);
  const int tile = warp % tiles;
  const int split = warp / tiles;
  if (split >= num_splits) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int t = lane % 4, q = lane / 4;
  const int row_a = tile * 16 + q, row_b = row_a + 8;
  const int load_a = min(row_a, out - 1), load_b = min(row_b, out - 1);
  const int steps = in / kFp8Step;
  const int s0 = split * steps_per_split, s1 = min(steps, s0 + steps_per_split);
  const uint8_t* wa = weight + static_cast<size_t>(load_a) * in + 16 * t;
  const uint8_t* wb = weight + static_cast<size_t>(load_b) * in + 16 * t;
  const bool has_x = q < rows;
  const __half* xq = x + static_cast<size_t>(has_x ? q : 0) * in + 4 * t;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = s0; s < s1; ++s) {
    const uint4 qa = LoadStreaming(wa + 64 * s);
    const uint4 qb = LoadStreaming(wb + 64 * s);
    const uint32_t words_a[4] = {qa.x, qa.y, qa.z, qa.w};
    const uint32_t words_b[4] = {qb.x, qb.y, qb.z, qb.w};
    const __half* xs = xq + kFp8Step * s;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      uint2 xv = make_uint2(0, 0);
      if (has_x) xv = __ldg(reinterpret_cast<const uint2*>(xs + 16 * g));
      MmaF16F32(acc, E4m3PairToHalf2Bits(words_a[g]), E4m3PairToHalf2Bits(words_b[g]),
                E4m3PairToHalf2Bits(words_a[g] >> 16), E4m3PairToHalf2Bits(words_b[g] >> 16), xv.x, xv.y);
    }
  }
  float* p = partial + static_cast<size_t>(split) * rows * out;
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

// y[n, o] = (sum over splits of partial[split, n, o]) * scale (per tensor, or per row when given).
__global__ void SumSplitsKernel(const float* __restrict__ partial, int num_splits, int rows, int out, float scale,
                                const float* __restrict__ row_scales, float* __restrict__ y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n = static_cast<int64_t>(rows) * out;
  if (i >= n) return;
  float sum = 0.f;
  for (int s = 0; s < num_splits; ++s) sum += partial[s * n + i];
  const int o = static_cast<int>(i % out);
  y[i] = sum * (row_scales ? row_scales[o] : scale);
}

__global__ void Bf16ToF16Kernel(const __nv_bfloat16* __restrict__ x, __half* __restrict__ y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(fminf(fmaxf(__bfloat162float(x[i]), -65504.f), 65504.f));
}

}  // namespace

cudaError_t LaunchNvfp4Decode(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kNvfp4Step);
  const int warps = p.tiles * p.num_splits;
  Nvfp4DecodeKernel<<<(warps + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * 32, 0, stream>>>(
      w.packed, w.scales, x, rows, w.out, w.in, p.tiles, p.steps_per_split, p.num_splits, partial);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const int64_t n = static_cast<int64_t>(rows) * w.out;
  // The kernel's weights carry a 2^-14 factor (see E2m1PairScaledDown); the global scale divides.
  SumSplitsKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      partial, p.num_splits, rows, w.out, 16384.0f / w.global_scale, nullptr, y);
  return cudaGetLastError();
}

cudaError_t LaunchFp8Decode(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            cudaStream_t stream) {
  const SplitPlan p = PlanSplits(w.out, w.in / kFp8Step);
  const int warps = p.tiles * p.num_splits;
  Fp8DecodeKernel<<<(warps + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * 32, 0, stream>>>(
      w.weight, x, rows, w.out, w.in, p.tiles, p.steps_per_split, p.num_splits, partial);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const int64_t n = static_cast<int64_t>(rows) * w.out;
  SumSplitsKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(partial, p.num_splits, rows, w.out,
                                                                               1.0f, w.scales, y);
  return cudaGetLastError();
}

cudaError_t LaunchBf16ToF16(const void* x_bf16, __half* x_f16, int64_t n, cudaStream_t stream) {
  Bf16ToF16Kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x_bf16), x_f16, n);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
