// Internal to kernels/cuda: the W4A4 GEMM launcher (w4a4_linear.cu) and its tile sizes, shared with
// the host code (w4a4_linear.cc). No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/nvfp4_activation_quant.h"
#include "kernels/cuda/w4a4_linear.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kW4a4TileOut = 128;   // weight rows a block computes (8 tiles of 16)
inline constexpr int kW4a4TileRows = 128;  // activation rows (tokens) a block computes (16 of 8)
inline constexpr int kW4a4TileK = 128;     // K elements a pipeline stage holds (2 mma steps)

// partial[r, o] (fp32 [rows, out], unscaled: sum of e2m1 * s products) = the W4A4 product of the
// quantised activation rows `a` ([rows, in]) and the weights `w`.
cudaError_t LaunchW4A4Gemm(const Nvfp4W4A4LinearDevice& w, const Nvfp4Activations& a, int rows, float* partial,
                           W4A4Mma mma, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
