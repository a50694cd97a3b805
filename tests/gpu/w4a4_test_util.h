// Shared by the W4A4 linear's GPU tests (gpu_ops_test with the software mma model on any GPU,
// gpu_blackwell_test with the hardware instruction): a random NVFP4 linear uploaded in the W4A4
// layout, random f16 activations (and the f32 values the CPU emulation sees), and one check of
// Nvfp4W4A4Linear against the CPU emulation for each epilogue.
#pragma once
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/w4a4_linear.h"
#include "tests/gpu/ops/gpu_test_util.h"
#include "tests/gpu/w4a4_reference.h"

namespace sparkserve::gpu_test {

struct W4A4Linear {
  Nvfp4Weight host;
  DeviceBuffer<uint8_t> codes, scales;
  DeviceBuffer<float> row_scales;
  kernels::cuda::Nvfp4W4A4LinearDevice device;
};

// `parts` > 1: a fused linear with per-part weight global scales (row_global_scales).
inline W4A4Linear UploadRandomW4A4(int out, int in, float input_gs, std::mt19937& rng, int parts = 1) {
  W4A4Linear l;
  l.host = RandomNvfp4Weight(out, in, rng, parts);
  const kernels::cuda::Nvfp4W4A4Layout layout = kernels::cuda::RepackNvfp4ForW4A4(l.host.packed, l.host.scales, out, in);
  l.codes = ToDevice(layout.codes);
  l.scales = ToDevice(layout.scales);
  l.device = {l.codes.data(), l.scales.data(), l.host.row_global_scale[0], input_gs, out, in, nullptr};
  if (parts > 1) {
    l.row_scales = ToDevice(l.host.row_global_scale);
    l.device.row_global_scales = l.row_scales.data();
  }
  return l;
}

// Activations [rows, in] as f16 for the kernel; `exact` gets their f32 values. Normal with a few
// values past the calibrated range (input_gs is set for |x| <= 4).
inline std::vector<__half> RandomActivations(int rows, int in, std::mt19937& rng, std::vector<float>* exact) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<__half> x(static_cast<size_t>(rows) * in);
  exact->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = (i % 211 == 0 ? 8.f : 1.f) * normal(rng);
    __half_raw raw;
    raw.x = core::F32ToF16(v);
    x[i] = __half(raw);
    (*exact)[i] = core::F16ToF32(raw.x);
  }
  return x;
}

inline constexpr float kTestInputGlobalScale = 448.f * 6.f / 4.f;

inline std::vector<float> HalvesToFloat(const std::vector<__half>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

inline std::vector<float> ToFloat(const std::vector<double>& d) { return std::vector<float>(d.begin(), d.end()); }

// Runs the linear (kStore) on `rows` random rows and compares sampled columns with the emulation.
inline void CheckW4A4Store(int rows, int out, int in, int parts, int col_step, kernels::cuda::W4A4Mma mma,
                           std::mt19937& rng, double tol) {
  const std::string what = "W4A4 rows " + std::to_string(rows) + " out " + std::to_string(out) + " in " +
                           std::to_string(in) + " parts " + std::to_string(parts);
  W4A4Linear l = UploadRandomW4A4(out, in, kTestInputGlobalScale, rng, parts);
  std::vector<float> xf;
  DeviceBuffer<__half> x = ToDevice(RandomActivations(rows, in, rng, &xf));
  DeviceBuffer<float> y = PoisonedF32(static_cast<size_t>(rows) * out);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kernels::cuda::W4A4LinearWorkspaceBytes(out, in, rows));
  ASSERT_TRUE(ws.ok());
  GPU_ASSERT_OK(kernels::cuda::Nvfp4W4A4Linear(l.device, x.data(), rows, y.data(), ws->data(), nullptr, {}, mma));
  const std::vector<float> got = ToHost(y);
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << what << ": an output is not finite (unwritten?)";
  const std::vector<int> cols = SampledColumns(out, col_step);
  const std::vector<double> want = EmulateW4A4Linear(l.host, xf, rows, kTestInputGlobalScale, cols);
  EXPECT_CLOSE(Columns(got, rows, out, cols), ToFloat(want), tol, what);
}

// SwiGLU (gate|up, out = 2F) and residual add + RMSNorm epilogues on the emulated output.
inline void CheckW4A4Epilogues(int rows, int in, kernels::cuda::W4A4Mma mma, std::mt19937& rng) {
  namespace kc = kernels::cuda;
  {
    const int f = 136;
    W4A4Linear l = UploadRandomW4A4(2 * f, in, kTestInputGlobalScale, rng, 2);
    std::vector<float> xf;
    DeviceBuffer<__half> x = ToDevice(RandomActivations(rows, in, rng, &xf));
    DeviceBuffer<__half> out = ToDevice(std::vector<__half>(static_cast<size_t>(rows) * f, __float2half(NAN)));
    auto ws = DeviceBuffer<uint8_t>::Allocate(kc::W4A4LinearWorkspaceBytes(2 * f, in, rows));
    ASSERT_TRUE(ws.ok());
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::SwiGlu(out.data());
    GPU_ASSERT_OK(kc::Nvfp4W4A4Linear(l.device, x.data(), rows, nullptr, ws->data(), nullptr, e, mma));
    const std::vector<double> gu = EmulateW4A4Linear(l.host, xf, rows, kTestInputGlobalScale, SampledColumns(2 * f, 1));
    std::vector<float> want(static_cast<size_t>(rows) * f);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < f; ++o) {
        const double g = gu[static_cast<size_t>(r) * 2 * f + o], u = gu[static_cast<size_t>(r) * 2 * f + f + o];
        want[static_cast<size_t>(r) * f + o] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
      }
    }
    EXPECT_CLOSE(HalvesToFloat(ToHost(out)), want, 2e-3, "W4A4 SwiGLU epilogue, rows " + std::to_string(rows));
  }
  {
    const int d = 320;
    const float eps = 1e-6f;
    W4A4Linear l = UploadRandomW4A4(d, in, kTestInputGlobalScale, rng);
    std::vector<float> xf;
    DeviceBuffer<__half> x = ToDevice(RandomActivations(rows, in, rng, &xf));
    const std::vector<float> residual0 = RandomF32(static_cast<size_t>(rows) * d, rng, 2.0f);
    const std::vector<float> w = RandomF32(static_cast<size_t>(d), rng, 0.1f);
    DeviceBuffer<float> residual = ToDevice(residual0), w_dev = ToDevice(w);
    DeviceBuffer<__half> out = ToDevice(std::vector<__half>(static_cast<size_t>(rows) * d, __float2half(NAN)));
    auto ws = DeviceBuffer<uint8_t>::Allocate(kc::W4A4LinearWorkspaceBytes(d, in, rows));
    ASSERT_TRUE(ws.ok());
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::AddRmsNorm(out.data(), residual.data(), w_dev.data(), eps);
    GPU_ASSERT_OK(kc::Nvfp4W4A4Linear(l.device, x.data(), rows, nullptr, ws->data(), nullptr, e, mma));
    const std::vector<double> delta = EmulateW4A4Linear(l.host, xf, rows, kTestInputGlobalScale, SampledColumns(d, 1));
    std::vector<float> sum(residual0.size()), normed(residual0.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int k = 0; k < d; ++k) {
        const size_t i = static_cast<size_t>(r) * d + k;
        sum[i] = static_cast<float>(residual0[i] + delta[i]);
        ss += static_cast<double>(sum[i]) * sum[i];
      }
      const double inv = 1.0 / std::sqrt(ss / d + eps);
      for (int k = 0; k < d; ++k) {
        const size_t i = static_cast<size_t>(r) * d + k;
        normed[i] = static_cast<float>(sum[i] * inv * (1.0 + w[static_cast<size_t>(k)]));
      }
    }
    EXPECT_CLOSE(ToHost(residual), sum, 1e-5, "W4A4 residual after the add, rows " + std::to_string(rows));
    EXPECT_CLOSE(HalvesToFloat(ToHost(out)), normed, 2e-3, "W4A4 normed rows, rows " + std::to_string(rows));
  }
}

}  // namespace sparkserve::gpu_test
