// W4A4 activation quantisation on the GPU: x [rows, in] (f16 or f32) -> NVFP4 codes + per-16 E4M3
// group scales with a module's static `input_global_scale`, exactly as the CPU emulation
// (model/activation_fake_quant.h QuantizeNvfp4Rows, itself checked against compressed-tensors) does
// it: same IEEE division, rounding, saturation, zero groups and NaN handling. Portable: compiled for
// and runnable on every target (the W4A4 GEMM that consumes it needs Blackwell: w4a4_linear.h).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

// Quantised activations in device memory, row-major like compressed-tensors' weight tensors.
struct Nvfp4Activations {
  uint8_t* codes;   // [rows, in/2] E2M1, element 2j the low nibble of byte j
  uint8_t* scales;  // [rows, in/16] float8_e4m3fn group scale s: x ~= e2m1 * s / input_global_scale
};

// Bytes of Nvfp4Activations for [rows, in]: rows * in / 2 codes + rows * in / 16 scales.
inline size_t Nvfp4ActivationBytes(int64_t rows, int64_t in) {
  return static_cast<size_t>(rows * in / 2 + rows * in / 16);
}

// Per 16-element group g of x (in % 16 == 0), with gs = input_global_scale (the stored divisor,
// finite and > 0):
//   s = e4m3(clamp(gs * (amax_g / 6), +-448)), s = 0 -> 0.125;  e = s / gs;
//   code_i = e2m1(clamp(x_i / e, +-6))  (round to nearest, ties to even; NaN -> +0, NaN ignored by
//   amax; +-inf saturates to +-6 with s = 448).
// `out` must not overlap x. Runs as a step kernel (PDL, no host sync); rows == 0 is a no-op.
absl::Status QuantizeActivationsNvfp4(const __half* x, int rows, int in, float input_global_scale,
                                      const Nvfp4Activations& out, cudaStream_t stream);
absl::Status QuantizeActivationsNvfp4(const float* x, int rows, int in, float input_global_scale,
                                      const Nvfp4Activations& out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
