// Decode-linear epilogues (decode_linear.h DecodeEpilogue) against the plain stored output of the
// same linear: SwiGLU of a fused gate|up, and residual add + zero-centred RMSNorm, for 1, 3 and 8
// rows and a chunked 11-row call through FromRow.
#include <cuda_fp16.h>

#include <cmath>

#include "core/half.h"
#include "kernels/cuda/decode_linear.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;

struct Fp8Linear {
  DeviceBuffer<uint8_t> codes;
  DeviceBuffer<float> scales;
  kc::Fp8LinearDevice device;
};

Fp8Linear RandomFp8(int out, int in, std::mt19937& rng) {
  std::uniform_int_distribution<int> code(0, 0x7e);  // finite e4m3 codes, random sign below
  std::vector<uint8_t> w(static_cast<size_t>(out) * in);
  for (uint8_t& c : w) c = static_cast<uint8_t>(code(rng) | ((rng() & 1) << 7));
  std::vector<float> s = RandomF32(static_cast<size_t>(out), rng, 1e-3f);
  for (float& v : s) v = std::abs(v) + 1e-4f;
  Fp8Linear l;
  l.codes = ToDevice(kc::RepackFp8ForDecode(w, out, in));
  l.scales = ToDevice(s);
  l.device = {l.codes.data(), l.scales.data(), out, in};
  return l;
}

std::vector<float> Halves(const std::vector<__half>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

std::vector<__half> RandomX(int rows, int in, std::mt19937& rng) {
  std::vector<float> xf = RandomF32(static_cast<size_t>(rows) * in, rng);
  std::vector<__half> x(xf.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = __float2half(xf[i]);
  return x;
}

// Runs `rows` rows in calls of at most 8 (as CudaLinear::Run does).
void RunChunked(const kc::Fp8LinearDevice& w, const __half* x, int rows, float* y, void* ws,
                const kc::DecodeEpilogue& e) {
  for (int r = 0; r < rows; r += kc::kMaxDecodeRows) {
    const int n = std::min(kc::kMaxDecodeRows, rows - r);
    GPU_ASSERT_OK(kc::Fp8DecodeLinear(w, x + static_cast<size_t>(r) * w.in, n, y ? y + static_cast<size_t>(r) * w.out : nullptr,
                                      ws, nullptr, e.FromRow(r, w.out)));
  }
}

TEST(DecodeEpilogueTest, SwiGluMatchesTheStoredGateUp) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(11);
  const int f = 200, in = 256;
  Fp8Linear l = RandomFp8(2 * f, in, rng);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::DecodeLinearWorkspaceBytes(2 * f, in, 8));
  ASSERT_TRUE(ws.ok());
  for (const int rows : {1, 3, 8, 11}) {
    DeviceBuffer<__half> x = ToDevice(RandomX(rows, in, rng));
    DeviceBuffer<float> y = PoisonedF32(static_cast<size_t>(rows) * 2 * f);
    RunChunked(l.device, x.data(), rows, y.data(), ws->data(), {});
    DeviceBuffer<__half> out = ToDevice(std::vector<__half>(static_cast<size_t>(rows) * f, __float2half(NAN)));
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::SwiGlu(out.data());
    RunChunked(l.device, x.data(), rows, nullptr, ws->data(), e);
    const std::vector<float> gu = ToHost(y);
    std::vector<float> want(static_cast<size_t>(rows) * f);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < f; ++o) {
        const float g = gu[static_cast<size_t>(r) * 2 * f + o], u = gu[static_cast<size_t>(r) * 2 * f + f + o];
        want[static_cast<size_t>(r) * f + o] = g / (1.0f + std::exp(-g)) * u;
      }
    }
    EXPECT_CLOSE(Halves(ToHost(out)), want, 2e-3, "swiglu epilogue, rows " + std::to_string(rows));
  }
}

TEST(DecodeEpilogueTest, AddRmsNormMatchesTheStoredOutput) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(12);
  const int d = 640, in = 512;
  const float eps = 1e-6f;
  Fp8Linear l = RandomFp8(d, in, rng);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::DecodeLinearWorkspaceBytes(d, in, 8));
  ASSERT_TRUE(ws.ok());
  const std::vector<float> w = RandomF32(static_cast<size_t>(d), rng, 0.1f);
  DeviceBuffer<float> w_dev = ToDevice(w);
  for (const int rows : {1, 3, 8, 11}) {
    DeviceBuffer<__half> x = ToDevice(RandomX(rows, in, rng));
    DeviceBuffer<float> y = PoisonedF32(static_cast<size_t>(rows) * d);
    RunChunked(l.device, x.data(), rows, y.data(), ws->data(), {});
    const std::vector<float> residual0 = RandomF32(static_cast<size_t>(rows) * d, rng, 2.0f);
    DeviceBuffer<float> residual = ToDevice(residual0);
    DeviceBuffer<__half> out = ToDevice(std::vector<__half>(static_cast<size_t>(rows) * d, __float2half(NAN)));
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::AddRmsNorm(out.data(), residual.data(), w_dev.data(), eps);
    RunChunked(l.device, x.data(), rows, nullptr, ws->data(), e);
    const std::vector<float> delta = ToHost(y);
    std::vector<float> sum(residual0.size()), normed(residual0.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int k = 0; k < d; ++k) {
        const size_t i = static_cast<size_t>(r) * d + k;
        sum[i] = residual0[i] + delta[i];
        ss += static_cast<double>(sum[i]) * sum[i];
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
      for (int k = 0; k < d; ++k) {
        const size_t i = static_cast<size_t>(r) * d + k;
        normed[i] = sum[i] * inv * (1.0f + w[static_cast<size_t>(k)]);
      }
    }
    EXPECT_CLOSE(ToHost(residual), sum, 1e-5, "residual after the add, rows " + std::to_string(rows));
    EXPECT_CLOSE(Halves(ToHost(out)), normed, 2e-3, "normed rows, rows " + std::to_string(rows));
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test
