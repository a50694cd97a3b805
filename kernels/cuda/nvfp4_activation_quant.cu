// NVFP4 activation quantisation kernels: one thread per 16-element group (32 or 64 bytes read, 8
// bytes of codes and 1 scale byte written; consecutive threads take consecutive groups, so a warp
// reads and writes contiguous memory). The math is quant/e2m1.h + quant/e4m3.h (host/device
// inline) with explicit IEEE division and multiplication (__fdiv_rn / __fmul_rn): the library is
// built with --use_fast_math, whose approximate `/` would not match the CPU emulation bit for bit.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/nvfp4_activation_quant_kernels.h"
#include "kernels/cuda/step_launch.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// The 16 values of group g as f32 (f16 widens exactly).
__device__ __forceinline__ void LoadGroup(const __half* __restrict__ x, int64_t g, float v[16]) {
  const uint4* p = reinterpret_cast<const uint4*>(x + g * 16);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4 u = p[h];
    const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      __half2_raw raw;
      raw.x = static_cast<unsigned short>(words[w] & 0xffffu);
      raw.y = static_cast<unsigned short>(words[w] >> 16);
      const float2 f = __half22float2(__half2(raw));
      v[8 * h + 2 * w] = f.x;
      v[8 * h + 2 * w + 1] = f.y;
    }
  }
}

__device__ __forceinline__ void LoadGroup(const float* __restrict__ x, int64_t g, float v[16]) {
  const float4* p = reinterpret_cast<const float4*>(x + g * 16);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float4 f = p[q];
    v[4 * q] = f.x;
    v[4 * q + 1] = f.y;
    v[4 * q + 2] = f.z;
    v[4 * q + 3] = f.w;
  }
}

// std::clamp(v, lo, hi) exactly: NaN passes through (the comparisons are false).
__device__ __forceinline__ float ClampLikeStd(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    QuantizeActivationsNvfp4Kernel(const T* __restrict__ x, int64_t groups, float gs, uint8_t* __restrict__ codes,
                                   uint8_t* __restrict__ scales) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= groups) return;
  float v[16];
  LoadGroup(x, g, v);
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float a = fabsf(v[i]);
    amax = amax < a ? a : amax;  // std::max(amax, a): a NaN never enters
  }
  const float t = ClampLikeStd(__fmul_rn(gs, __fdiv_rn(amax, quant::kE2M1Max)), -quant::kE4M3Max, quant::kE4M3Max);
  uint8_t scale = quant::F32ToE4M3(t);
  float s = quant::E4M3ToF32(scale);
  if (s == 0.0f) {  // the library's fp8 eps for an all-zero (or negligible) group
    s = 0.125f;
    scale = quant::F32ToE4M3(0.125f);
  }
  const float e = __fdiv_rn(s, gs);
  uint32_t lo = 0, hi = 0;  // codes of elements 0..7 and 8..15, element i at nibble i
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t c = quant::F32ToE2M1(ClampLikeStd(__fdiv_rn(v[i], e), -quant::kE2M1Max, quant::kE2M1Max));
    if (i < 8) {
      lo |= c << (4 * i);
    } else {
      hi |= c << (4 * (i - 8));
    }
  }
  *reinterpret_cast<uint2*>(codes + g * 8) = make_uint2(lo, hi);
  scales[g] = scale;
}

template <typename T>
cudaError_t Launch(const T* x, int64_t groups, float gs, const Nvfp4Activations& out, cudaStream_t stream) {
  if (groups == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((groups + kThreads - 1) / kThreads));
  return LaunchStepKernel(QuantizeActivationsNvfp4Kernel<T>, grid, dim3(kThreads), 0, stream, x, groups, gs, out.codes,
                          out.scales);
}

}  // namespace

cudaError_t LaunchQuantizeActivationsNvfp4(const __half* x, int64_t groups, float gs, const Nvfp4Activations& out,
                                           cudaStream_t stream) {
  return Launch(x, groups, gs, out, stream);
}

cudaError_t LaunchQuantizeActivationsNvfp4(const float* x, int64_t groups, float gs, const Nvfp4Activations& out,
                                           cudaStream_t stream) {
  return Launch(x, groups, gs, out, stream);
}

}  // namespace sparkserve::kernels::cuda
