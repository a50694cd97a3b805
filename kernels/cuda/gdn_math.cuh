// The per-token scalar math every Gated DeltaNet kernel shares (sequential, decode, chunked): the
// gates and the SiLU of the output gate, as the CPU twins compute them (kernels/cpu activation.cc
// GdnGates); and the state's loads and stores in its stored dtype (gdn.h GdnStateDtype). nvcc only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_common.cuh"

namespace sparkserve::kernels::cuda {

__device__ __forceinline__ float SiluF(float x) { return x / (1.0f + expf(-x)); }

// Log decay of one token and value head: g = -exp(a_log) softplus(a + dt_bias), with a_scale =
// exp(a_log) and ax = a + dt_bias (softplus(x) = x past 20, where log1p(exp(x)) rounds to x).
__device__ __forceinline__ float GdnLogDecay(float ax, float a_scale) {
  const float softplus = ax > 20.0f ? ax : log1pf(expf(ax));
  return -a_scale * softplus;
}

// The delta rule's write strength: beta = sigmoid(b).
__device__ __forceinline__ float GdnBeta(float b) { return 1.0f / (1.0f + expf(-b)); }

// ---- The recurrent state in its stored dtype: f32, or bf16 (bf16 = true) widened on load and
// rounded to nearest even on store. `i` counts elements from `state`; the vector forms need i to be
// a multiple of their width (16-byte aligned f32 rows, 8-byte bf16 ones). The state is read and
// written once a step, so loads and stores stream (evict-first).

__device__ __forceinline__ uint32_t Float2ToBf16Pair(float x, float y) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ float LoadGdnState(const void* state, size_t i, bool bf16) {
  if (bf16) {
    const uint16_t w = __ldcs(static_cast<const unsigned short*>(state) + i);
    return __uint_as_float(static_cast<uint32_t>(w) << 16);
  }
  return __ldcs(static_cast<const float*>(state) + i);
}
__device__ __forceinline__ float4 LoadGdnState4(const void* state, size_t i, bool bf16) {
  if (bf16) {
    return Bf16QuadToFloat4(__ldcs(reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(state) + i)));
  }
  return __ldcs(reinterpret_cast<const float4*>(static_cast<const float*>(state) + i));
}
__device__ __forceinline__ void StoreGdnState2(void* state, size_t i, float2 v, bool bf16) {
  if (bf16) {
    __stcs(reinterpret_cast<unsigned int*>(static_cast<__nv_bfloat16*>(state) + i), Float2ToBf16Pair(v.x, v.y));
  } else {
    __stcs(reinterpret_cast<float2*>(static_cast<float*>(state) + i), v);
  }
}
__device__ __forceinline__ void StoreGdnState4(void* state, size_t i, float4 v, bool bf16) {
  if (bf16) {
    __stcs(reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(state) + i),
           make_uint2(Float2ToBf16Pair(v.x, v.y), Float2ToBf16Pair(v.z, v.w)));
  } else {
    __stcs(reinterpret_cast<float4*>(static_cast<float*>(state) + i), v);
  }
}

}  // namespace sparkserve::kernels::cuda
