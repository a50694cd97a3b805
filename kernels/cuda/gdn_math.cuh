// The per-token scalar math every Gated DeltaNet kernel shares (sequential, decode, chunked): the
// gates and the SiLU of the output gate, as the CPU twins compute them (kernels/cpu activation.cc
// GdnGates). nvcc only.
#pragma once
#include <cuda_runtime.h>

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

}  // namespace sparkserve::kernels::cuda
