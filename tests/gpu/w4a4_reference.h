// CPU emulation of the W4A4 NVFP4 linear (kernels/cuda/w4a4_linear.h), shared by the GPU tests and
// its CPU unit test: activations quantised by the CPU emulation the quantize eval uses
// (quant::QuantizeNvfp4Rows, checked bit for bit against compressed-tensors), multiplied with the
// weights' exact dequantisation e2m1 * e4m3 / weight_global_scale, summed in double. Plus random
// NVFP4 weights.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/activation_quant.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sparkserve::gpu_test {

// One NVFP4 linear as compressed-tensors stores it; a fused linear has several global scales.
struct Nvfp4Weight {
  int out = 0, in = 0;
  std::vector<uint8_t> packed;             // [out, in/2] E2M1, element 2j the low nibble of byte j
  std::vector<uint8_t> scales;             // [out, in/16] float8_e4m3fn
  std::vector<float> row_global_scale;     // [out] the divisor of each row's part
};

// A random [out, in] NVFP4 weight: uniform E2M1 codes, group scales spread over e4m3's range up to
// 448 (every 64th group zero, as a zero weight block quantises), and per part a global scale
// 448 * 6 / amax with amax drawn from [0.05, 5]. `parts` splits `out` into equal parts with their own
// global scales (a fused q|k|v or gate|up). Cheap to draw: one random word per 8 codes.
inline Nvfp4Weight RandomNvfp4Weight(int out, int in, std::mt19937& rng, int parts = 1) {
  Nvfp4Weight q{out, in, std::vector<uint8_t>(static_cast<size_t>(out) * in / 2),
                std::vector<uint8_t>(static_cast<size_t>(out) * in / 16), std::vector<float>(static_cast<size_t>(out))};
  for (size_t i = 0; i < q.packed.size(); i += 4) {
    const uint32_t word = static_cast<uint32_t>(rng());
    for (size_t b = 0; b < 4 && i + b < q.packed.size(); ++b) q.packed[i + b] = static_cast<uint8_t>(word >> (8 * b));
  }
  std::uniform_int_distribution<int> scale_code(0x08, 0x7e);  // smallest normal .. 448
  for (size_t g = 0; g < q.scales.size(); ++g) q.scales[g] = g % 64 == 5 ? 0 : static_cast<uint8_t>(scale_code(rng));
  std::uniform_real_distribution<float> amax(0.05f, 5.f);
  const int part_rows = (out + parts - 1) / parts;
  for (int p0 = 0; p0 < out; p0 += part_rows) {
    const float gs = 448.f * 6.f / amax(rng);
    for (int r = p0; r < std::min(out, p0 + part_rows); ++r) q.row_global_scale[static_cast<size_t>(r)] = gs;
  }
  return q;
}

// The output columns a check computes: every `step`-th of [0, out) and the last (big shapes are
// checked on a sample so the double-precision reference stays fast).
inline std::vector<int> SampledColumns(int out, int step) {
  std::vector<int> cols;
  for (int o = 0; o < out; o += step) cols.push_back(o);
  if (cols.back() != out - 1) cols.push_back(out - 1);
  return cols;
}

// y [rows, cols.size()]: column c is output cols[c] of (x quantised: codes / scales with input_gs)
// . dequant(W)^T, in double. x_codes [rows, in/2], x_scales [rows, in/16] as QuantizeNvfp4Rows and
// the GPU kernel write them.
inline std::vector<double> EmulateW4A4FromCodes(const Nvfp4Weight& w, const std::vector<uint8_t>& x_codes,
                                                const std::vector<uint8_t>& x_scales, int rows, float input_gs,
                                                const std::vector<int>& cols) {
  const int in = w.in, groups = in / 16;
  auto deq = [groups, in](const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int row, double* out) {
    for (int k = 0; k < in; ++k) {
      const uint8_t b = codes[(static_cast<size_t>(row) * in + k) / 2];
      const double e = quant::E2M1ToF32(static_cast<uint8_t>(k % 2 ? b >> 4 : b & 0xf));
      out[k] = e * quant::E4M3ToF32(scales[static_cast<size_t>(row) * groups + k / 16]);
    }
  };
  std::vector<double> xd(static_cast<size_t>(rows) * in), wr(static_cast<size_t>(in));
  for (int r = 0; r < rows; ++r) deq(x_codes, x_scales, r, xd.data() + static_cast<size_t>(r) * in);
  std::vector<double> y(static_cast<size_t>(rows) * cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    const int o = cols[c];
    deq(w.packed, w.scales, o, wr.data());
    const double divisor = static_cast<double>(input_gs) * w.row_global_scale[static_cast<size_t>(o)];
    for (int r = 0; r < rows; ++r) {
      const double* xr = xd.data() + static_cast<size_t>(r) * in;
      double s = 0;
      for (int k = 0; k < in; ++k) s += xr[k] * wr[static_cast<size_t>(k)];
      y[static_cast<size_t>(r) * cols.size() + c] = s / divisor;
    }
  }
  return y;
}

// The same from x [rows, in] f32, quantised by the CPU emulation.
inline std::vector<double> EmulateW4A4Linear(const Nvfp4Weight& w, const std::vector<float>& x, int rows,
                                             float input_gs, const std::vector<int>& cols) {
  std::vector<uint8_t> codes(static_cast<size_t>(rows) * w.in / 2), scales(static_cast<size_t>(rows) * w.in / 16);
  quant::QuantizeNvfp4Rows(x.data(), rows, w.in, input_gs, codes.data(), scales.data());
  return EmulateW4A4FromCodes(w, codes, scales, rows, input_gs, cols);
}

// got [rows, out] restricted to `cols` (the layout the emulation returns).
inline std::vector<float> Columns(const std::vector<float>& got, int rows, int out, const std::vector<int>& cols) {
  std::vector<float> r(static_cast<size_t>(rows) * cols.size());
  for (int i = 0; i < rows; ++i) {
    for (size_t c = 0; c < cols.size(); ++c) r[static_cast<size_t>(i) * cols.size() + c] = got[static_cast<size_t>(i) * out + cols[c]];
  }
  return r;
}

}  // namespace sparkserve::gpu_test
