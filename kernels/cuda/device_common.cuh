// Small pieces every kernel family of kernels/cuda shares: streaming 16-byte loads of data read
// once, bf16 pairs widened to f32, f32 -> f16 saturating at +-65504 (NaN stays NaN), SiLU, and the
// device's SM count and shared memory for grid sizing.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkserve::kernels::cuda {

// 16 bytes that no one reads again in this kernel (weights, KV): bypass L1.
__device__ __forceinline__ uint4 LoadStreaming(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Two bf16 packed in a 32-bit word (element 0 in the low half) as f32: bf16 -> f32 moves the 16 bits
// to the top.
__device__ __forceinline__ float2 Bf16PairToFloat2(uint32_t w) {
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
// Four bf16 (two words, element 0 in the low half of x) as f32.
__device__ __forceinline__ float4 Bf16QuadToFloat4(uint2 w) {
  const float2 lo = Bf16PairToFloat2(w.x), hi = Bf16PairToFloat2(w.y);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Clamps to f16's finite range; comparisons with NaN are false, so NaN stays NaN.
__device__ __forceinline__ float SaturateToHalfRange(float v) {
  return v > 65504.f ? 65504.f : (v < -65504.f ? -65504.f : v);
}
__device__ __forceinline__ __half ToHalfSaturated(float v) { return __float2half_rn(SaturateToHalfRange(v)); }

// silu(v) = v * sigmoid(v), with the fast exponential (every SwiGLU: norm_ops, the linear epilogues).
__device__ __forceinline__ float Silu(float v) { return v / (1.0f + __expf(-v)); }

// SMs of the current device (132 when it cannot be read), looked up once per process.
inline int MultiprocessorCount() {
  static const int count = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 132;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 132;
    return n > 0 ? n : 132;
  }();
  return count;
}

// Shared memory of the current device (H100/H200: 228 KB a SM, 227 KB a block opted into; sm_120/121:
// 100 / 99 KB), looked up once per process; the smallest supported device's when unreadable.
struct SharedMemoryLimits {
  int per_sm, per_block;
};
inline const SharedMemoryLimits& DeviceSharedMemory() {
  static const SharedMemoryLimits limits = [] {
    SharedMemoryLimits l{100 * 1024, 99 * 1024};
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return l;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess && v > 0) l.per_sm = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess && v > 0) l.per_block = v;
    return l;
  }();
  return limits;
}

}  // namespace sparkserve::kernels::cuda
