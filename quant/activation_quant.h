// Activation quantisation codecs: NVFP4 activation QDQ and quantisation (per 16-element group, as
// the compressed-tensors library's tensor_group QDQ), FP8 KV QDQ, and the checkpoint's FP8 KV scales.
// The CPU simulator (calib/activation_fake_quant.h) and the CUDA kernels' references use them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "quant/checkpoint.h"

namespace sparkserve::quant {

// NVFP4 QDQ of x [rows, in] (in a multiple of 16) with global scale `gs` (the stored divisor):
// per group s = fp8(clamp(gs * amax16 / 6, +-448)) (0 -> 0.125, the library's fp8 eps),
// e = s / gs, out = e2m1(clamp(x / e, +-6)) * e. `out` may alias `x`. NaN inputs do not enter amax
// and quantise to +0; +-inf saturate (amax inf -> s = 448, the element -> +-6).
void FakeQuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, float* out);
// The same quantisation keeping what a W4A4 kernel consumes: codes [rows, in/2] (E2M1, element 2j
// the low nibble of byte j) and scales [rows, in/16] (float8_e4m3fn s, the 0 -> 0.125 substitution
// included), so that FakeQuantizeNvfp4Rows(x) == e2m1(code) * (s / gs) bit for bit.
void QuantizeNvfp4Rows(const float* x, int64_t rows, int64_t in, float gs, uint8_t* codes, uint8_t* scales);
// FP8 KV QDQ in place: x = fp8(x / scale) * scale (saturating at +-448).
void FakeQuantizeFp8(float* x, int64_t count, float scale);

// The FP8 KV-cache scales a checkpoint stores: attention module ("model.layers.3.self_attn") ->
// {k_scale, v_scale} (per tensor, positive and finite, else an error naming the module).
absl::StatusOr<std::map<std::string, std::pair<float, float>>> ReadKvScales(const Checkpoint& ckpt);

}  // namespace sparkserve::quant
