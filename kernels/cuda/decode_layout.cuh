// Device side of the decode weight layouts (decode_linear.h): the E2M1 / E4M3 unpacking of a lane's
// 16-byte words into its mma A fragments (the mma and cp.async wrappers are ptx.cuh's). nvcc only.
//
// NVFP4 word layout (RepackNvfp4ForDecode): word w of a lane's 16 bytes holds the lane's 4 elements
// 4t..4t+3 of K groups 2w and 2w+1 as four fp16x2 "pairs": pair 0 = group 2w elements (0, 1), pair
// 1 = group 2w elements (2, 3), pair 2 = group 2w+1 elements (0, 1), pair 3 = group 2w+1 elements
// (2, 3) — mma registers a0, a2 of the first k16 slice and a0, a2 of the second (row q; the word of
// row q + 8 gives a1, a3). In each 16-bit half (low half: the pair's first element, high half: its
// second) pair k keeps its 3 magnitude bits at bits 3k..3k+2 and its sign at bit {14, 13, 12, 15}[k],
// so one shift (or none) and one or two masks put them on fp16's two low exponent bits + top
// mantissa bit (9..11) and sign (15): 11 integer operations a word instead of 16 for plain nibbles.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/decode_linear_kernels.h"
#include "kernels/cuda/ptx.cuh"

namespace sparkserve::kernels::cuda {

// Pair k of an NVFP4 word as fp16x2 holding value * 2^-14 exactly (E2M1's exponent lands on fp16's
// two low exponent bits, subnormal 0.5 included; the 2^14 goes into the scale).
template <int K>
__device__ __forceinline__ uint32_t E2m1PairScaledDown(uint32_t w) {
  static_assert(K >= 0 && K < 4 && kE2m1PairSignBit[K] == (K == 3 ? 15 : 14 - K));
  if constexpr (K == 3) {
    return w & 0x8E008E00u;
  } else if constexpr (K == 2) {
    return (w << 3) & 0x8E008E00u;
  } else if constexpr (K == 1) {
    return ((w << 6) & 0x0E000E00u) | ((w << 2) & 0x80008000u);
  } else {
    return ((w << 9) & 0x0E000E00u) | ((w << 1) & 0x80008000u);
  }
}

__device__ __forceinline__ float2 E4m3PairToFloat2(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(h));
}

__device__ __forceinline__ uint32_t E4m3PairToHalf2Bits(uint32_t two_codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// a * b per fp16 lane (the NVFP4 kernels multiply e2m1 * 2^-14 by its group scale: exact, see
// gemm_linear.cu Nvfp4Format::Dequantise).
__device__ __forceinline__ uint32_t MulHalf2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

}  // namespace sparkserve::kernels::cuda
