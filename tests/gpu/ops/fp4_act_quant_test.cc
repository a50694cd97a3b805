// NVFP4 activation quantisation on the GPU (kernels/cuda/nvfp4_activation_quant.h) bit for bit
// against the CPU emulation the quantize eval uses (quant::QuantizeNvfp4Rows): every code and scale
// byte, f16 and f32 inputs, normal / heavy-tailed / zero and negligible groups / values past the
// clipping point / NaN, +-inf and -0, the 4B's widths and small ones, outputs poisoned with guard
// bytes after them. Runs on any GPU.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/nvfp4_activation_quant.h"
#include "quant/activation_quant.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;

constexpr uint8_t kPoison = 0xa5;
constexpr size_t kGuard = 64;

enum class Dist { kNormal, kHeavyTailed, kSpecial };

// x [rows, in]: the distribution, with whole zero groups, negligible groups, outliers far past the
// calibrated range, and (kSpecial) NaN / +-inf / -0 sprinkled in.
std::vector<float> MakeInput(int rows, int in, Dist dist, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::student_t_distribution<float> heavy(1.5f);
  std::vector<float> x(static_cast<size_t>(rows) * in);
  for (float& v : x) v = dist == Dist::kHeavyTailed ? heavy(rng) : normal(rng);
  const size_t groups = x.size() / 16;
  std::uniform_int_distribution<size_t> pick_group(0, groups - 1), pick(0, x.size() - 1);
  for (size_t n = 0; n < 1 + groups / 16; ++n) {
    const size_t g = pick_group(rng);
    for (int i = 0; i < 16; ++i) x[g * 16 + i] = 0.f;  // a zero group: scale 0 -> 0.125
  }
  for (size_t n = 0; n < 1 + groups / 16; ++n) {
    const size_t g = pick_group(rng);
    for (int i = 0; i < 16; ++i) x[g * 16 + i] = 1e-7f * normal(rng);  // negligible: its scale rounds to 0
  }
  for (size_t n = 0; n < 1 + x.size() / 97; ++n) x[pick(rng)] = 300.f * normal(rng);  // past the clipping point
  if (dist == Dist::kSpecial) {
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), -0.0f, 6.0e4f, -6.0e4f};
    for (size_t n = 0; n < 4 + x.size() / 61; ++n) x[pick(rng)] = specials[n % 6];
  }
  return x;
}

std::vector<uint8_t> Poisoned(size_t n) { return std::vector<uint8_t>(n + kGuard, kPoison); }

// Compares every byte; on a mismatch names the row, group and the group's inputs.
void ExpectSameBytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int in, int bytes_per_group,
                     const std::vector<float>& x, const std::string& what) {
  ASSERT_EQ(got.size(), want.size() + kGuard) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    const size_t g = i / static_cast<size_t>(bytes_per_group);
    std::string values;
    for (int k = 0; k < 16; ++k) values += std::to_string(x[g * 16 + k]) + " ";
    FAIL() << what << ": byte " << i << " (row " << g * 16 / in << ", group " << g % (in / 16) << ") is 0x" << std::hex
           << int(got[i]) << ", the CPU emulation's 0x" << int(want[i]) << std::dec << "; group inputs: " << values;
  }
  for (size_t i = want.size(); i < got.size(); ++i) ASSERT_EQ(got[i], kPoison) << what << ": wrote past the end (byte " << i << ")";
}

// Quantises x (f16 when `half`, else f32) on the GPU and on the CPU, and compares every byte.
void CheckOne(int rows, int in, float gs, Dist dist, bool half, std::mt19937& rng) {
  const std::string what = std::string(half ? "f16" : "f32") + " rows " + std::to_string(rows) + " in " +
                           std::to_string(in) + " gs " + std::to_string(gs) + " dist " + std::to_string(int(dist));
  std::vector<float> x = MakeInput(rows, in, dist, rng);
  DeviceBuffer<__half> x16;
  DeviceBuffer<float> x32;
  if (half) {  // the CPU sees exactly the f16 values the kernel reads
    std::vector<__half> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      __half_raw raw;
      raw.x = core::F32ToF16(x[i]);
      h[i] = __half(raw);
      x[i] = core::F16ToF32(raw.x);
    }
    x16 = ToDevice(h);
  } else {
    x32 = ToDevice(x);
  }
  const size_t ncodes = x.size() / 2, nscales = x.size() / 16;
  DeviceBuffer<uint8_t> codes = ToDevice(Poisoned(ncodes)), scales = ToDevice(Poisoned(nscales));
  const kc::Nvfp4Activations out{codes.data(), scales.data()};
  if (half) {
    GPU_ASSERT_OK(kc::QuantizeActivationsNvfp4(x16.data(), rows, in, gs, out, nullptr));
  } else {
    GPU_ASSERT_OK(kc::QuantizeActivationsNvfp4(x32.data(), rows, in, gs, out, nullptr));
  }
  std::vector<uint8_t> want_codes(ncodes), want_scales(nscales);
  quant::QuantizeNvfp4Rows(x.data(), rows, in, gs, want_codes.data(), want_scales.data());
  ExpectSameBytes(ToHost(scales), want_scales, in, 1, x, what + " scales");
  ExpectSameBytes(ToHost(codes), want_codes, in, 8, x, what + " codes");
}

TEST(Fp4ActQuantTest, MatchesTheCpuEmulationBitForBitAtTheModelsWidths) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(901);
  for (const int in : {2560, 4096, 9216}) {
    for (const int rows : {1, 3, 37}) {
      for (const bool half : {true, false}) {
        CheckOne(rows, in, 448.f * 6.f / 3.f, half ? Dist::kNormal : Dist::kHeavyTailed, half, rng);
      }
    }
  }
}

TEST(Fp4ActQuantTest, MatchesTheCpuEmulationBitForBitOnSmallWidthsAndSpecialValues) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(902);
  // gs: calibrated for |x| <= 3, for tiny activations (most groups clip), for huge ones (most
  // scales land in e4m3's subnormal range).
  for (const float gs : {448.f * 6.f / 3.f, 448.f * 6.f / 0.05f, 0.01f}) {
    for (const int in : {16, 48, 128, 2560}) {
      for (const int rows : {1, 5, 100}) {
        for (const Dist d : {Dist::kNormal, Dist::kHeavyTailed, Dist::kSpecial}) {
          CheckOne(rows, in, gs, d, true, rng);
          CheckOne(rows, in, gs, d, false, rng);
        }
      }
    }
  }
}

TEST(Fp4ActQuantTest, ZeroRowsWritesNothing) {
  ASSERT_TRUE(HasCudaDevice());
  DeviceBuffer<float> x = ToDevice(std::vector<float>(32, 1.f));
  DeviceBuffer<uint8_t> codes = ToDevice(Poisoned(0)), scales = ToDevice(Poisoned(0));
  GPU_ASSERT_OK(kc::QuantizeActivationsNvfp4(x.data(), 0, 32, 1.f, {codes.data(), scales.data()}, nullptr));
  for (uint8_t b : ToHost(codes)) EXPECT_EQ(b, kPoison);
  for (uint8_t b : ToHost(scales)) EXPECT_EQ(b, kPoison);
}

TEST(Fp4ActQuantTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  DeviceBuffer<float> x = ToDevice(std::vector<float>(64, 1.f));
  DeviceBuffer<uint8_t> codes = ToDevice(Poisoned(32)), scales = ToDevice(Poisoned(4));
  const kc::Nvfp4Activations out{codes.data(), scales.data()};
  auto code_of = [&](int rows, int in, float gs, const float* p, kc::Nvfp4Activations o) {
    return kc::QuantizeActivationsNvfp4(p, rows, in, gs, o, nullptr).code();
  };
  EXPECT_EQ(code_of(1, 24, 1.f, x.data(), out), absl::StatusCode::kInvalidArgument);  // in % 16
  EXPECT_EQ(code_of(1, 0, 1.f, x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(-1, 64, 1.f, x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, 0.f, x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, -2.f, x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, std::numeric_limits<float>::quiet_NaN(), x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, std::numeric_limits<float>::infinity(), x.data(), out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, 1.f, nullptr, out), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, 1.f, x.data(), {nullptr, scales.data()}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of(1, 64, 1.f, x.data() + 1, out), absl::StatusCode::kInvalidArgument);  // misaligned x
  for (uint8_t b : ToHost(codes)) EXPECT_EQ(b, kPoison);  // nothing ran
}

}  // namespace
}  // namespace sparkserve::gpu_test
