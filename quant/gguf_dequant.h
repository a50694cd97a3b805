// Dequantisation of ggml tensor data to f32, exactly as ggml's reference dequantize_row_* define
// it (float32 arithmetic, the same order of operations): F32, F16, BF16, Q8_0 (blocks of 32: f16
// scale d, 32 x i8; x = d * q), and the K-quants over super-blocks of 256: Q4_K (f16 d, f16 dmin,
// 12 bytes of 6-bit scales/mins for 8 sub-blocks of 32, 4-bit q; x = d*sc * q - dmin*m), Q5_K (as
// Q4_K plus a fifth bit per q from qh) and Q6_K (128 bytes low nibbles, 64 bytes high 2 bits, 16 x
// i8 scales, f16 d; x = d * sc * (q - 32)).
#pragma once
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace sparkserve::quant {

// Dequantises `n` elements (a whole number of blocks of `type`) from `src` into `dst`. `src` must
// hold exactly the blocks' bytes (checked).
absl::Status DequantizeGgml(uint32_t type, std::span<const uint8_t> src, float* dst, int64_t n);

}  // namespace sparkserve::quant
