// GPU dense bf16 linear (kernels/cuda/dense_linear.h) against the CPU Linear (kernels/cpu/ops.h)
// on the same bf16-rounded weights and f16-rounded activations, outputs poisoned with NaN: the
// GEMV path (rows <= 8: the 4B's GDN in_proj_a/b, a square 2560 layer, an lm_head-like 8192 x 2560),
// its scalar fallback (odd `in`, offset pointers), the tensor-core tiles (rows > 8) and their f32
// fallback (odd `in`, offset pointers).
#include "kernels/cuda/dense_linear.h"

#include <string>

#include "core/half.h"
#include "kernels/cpu/ops.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;

// Both sides sum exact products of the same rounded inputs in fp32, in different orders.
constexpr double kTol = 1e-5;

struct LinearCase {
  int rows, out, in;
  int x_offset = 0;  // elements the activations start past an aligned address (1: scalar GEMV)
};

std::string Name(const LinearCase& c) {
  return "dense linear rows " + std::to_string(c.rows) + " out " + std::to_string(c.out) + " in " +
         std::to_string(c.in) + " x offset " + std::to_string(c.x_offset);
}

void CheckAgainstCpu(const LinearCase& c) {
  SCOPED_TRACE(Name(c));
  std::mt19937 rng(static_cast<uint32_t>(c.rows * 1000003 + c.out * 1009 + c.in + c.x_offset));
  const size_t w_count = static_cast<size_t>(c.out) * c.in, x_count = static_cast<size_t>(c.rows) * c.in;
  // Weights like a trained layer's (std 0.02), activations O(1) with a few large ones.
  std::vector<float> w = RandomF32(w_count, rng, 0.02f), x = RandomF32(x_count + c.x_offset, rng, 1.0f);
  for (int i = 0; i < 4; ++i) x[rng() % x.size()] *= 30.f;
  std::vector<uint16_t> w_bf16(w_count), x_f16(x.size());
  for (size_t i = 0; i < w_count; ++i) {
    w_bf16[i] = core::F32ToBf16(w[i]);
    w[i] = core::Bf16ToF32(w_bf16[i]);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    x_f16[i] = core::F32ToF16(x[i]);
    x[i] = core::F16ToF32(x_f16[i]);
  }
  std::vector<float> want(static_cast<size_t>(c.rows) * c.out);
  kernels::cpu::Linear(x.data() + c.x_offset, c.rows, c.in, w.data(), c.out, want.data());

  DeviceBuffer<uint16_t> dw = ToDevice(w_bf16), dx = ToDevice(x_f16);
  DeviceBuffer<float> y = PoisonedF32(want.size());
  GPU_ASSERT_OK(kc::DenseLinearBf16(reinterpret_cast<const __nv_bfloat16*>(dw.data()), c.out, c.in,
                                    reinterpret_cast<const __half*>(dx.data() + c.x_offset), c.rows, y.data(),
                                    nullptr));
  EXPECT_CLOSE(ToHost(y), want, kTol, Name(c));
}

TEST(DenseLinearTest, GemvMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  const LinearCase cases[] = {
      {1, 32, 2560},    {3, 32, 2560},    {8, 32, 2560},  // GDN in_proj_a/b of the 4B (nv = 32)
      {1, 2560, 2560},  {4, 2560, 2560},  {8, 2560, 2560},
      {1, 8192, 2560},  {8, 8192, 2560},  // lm_head-like: 4 outputs a block
      {2, 1024, 1024},  {6, 1030, 9216},  // 2 outputs a block; the 4B's MLP down width
      {5, 700, 512},    {7, 3, 8},        {1, 1, 8},
      {3, 7, 24},  // odd out, in 24 (three 16-byte vectors a row)
  };
  for (const LinearCase& c : cases) CheckAgainstCpu(c);
}

TEST(DenseLinearTest, ScalarGemvMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice());
  const LinearCase cases[] = {
      {2, 5, 13}, {8, 9, 1}, {1, 33, 2561}, {3, 7, 27},
      {4, 40, 256, 1}, {8, 64, 2560, 3},  // in % 8 == 0 but x not 16-byte aligned
  };
  for (const LinearCase& c : cases) CheckAgainstCpu(c);
}

// rows > 8 with in % 8 == 0 and aligned pointers: the tensor-core tiles (32-row tiles up to 32 rows,
// 64-row tiles past that, 16-row tiles of 32 warps under 16 blocks: {64, 64, 2560}, {64, 200, 2560},
// {32, 33, 2560}...; K steps of 32 with a partial last step when in % 32 != 0).
TEST(DenseLinearTest, MmaTilesMatchCpu) {
  ASSERT_TRUE(HasCudaDevice());
  const LinearCase cases[] = {
      {9, 2560, 2560}, {64, 200, 2560}, {300, 130, 264},  // partial row / output tiles, in % 32 != 0
      {64, 64, 2560},  {4096, 64, 2560},                   // the 4B's fused in_proj_a/b: 64 seqs, a prefill chunk
      {300, 32, 2560}, {32, 33, 2560},  {33, 31, 9216},    // the row-tile switch at 32; the 4B's down width
      {17, 1, 8},      {128, 64, 16},   {40, 7, 24},       // one output, in below one K step
  };
  for (const LinearCase& c : cases) CheckAgainstCpu(c);
}

// rows > 8 with in % 8 != 0 or a misaligned pointer: the f32 tiled fallback.
TEST(DenseLinearTest, TiledFallbackMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice());
  const LinearCase cases[] = {
      {300, 37, 100}, {9, 1, 7}, {65, 65, 17}, {10, 3, 24, 1}, {70, 64, 2560, 2},
  };
  for (const LinearCase& c : cases) CheckAgainstCpu(c);
}

TEST(DenseLinearTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  DeviceBuffer<uint16_t> w = ToDevice(std::vector<uint16_t>(64)), x = ToDevice(std::vector<uint16_t>(64));
  DeviceBuffer<float> y = PoisonedF32(64);
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(w.data());
  const auto* xp = reinterpret_cast<const __half*>(x.data());
  auto code = [](const absl::Status& s) { return s.code(); };
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(kc::DenseLinearBf16(wp, 0, 8, xp, 1, y.data(), nullptr)), kBad);
  EXPECT_EQ(code(kc::DenseLinearBf16(wp, 8, 0, xp, 1, y.data(), nullptr)), kBad);
  EXPECT_EQ(code(kc::DenseLinearBf16(wp, 8, 8, xp, 0, y.data(), nullptr)), kBad);
  EXPECT_EQ(code(kc::DenseLinearBf16(nullptr, 8, 8, xp, 1, y.data(), nullptr)), kBad);
  EXPECT_EQ(code(kc::DenseLinearBf16(wp, 8, 8, nullptr, 1, y.data(), nullptr)), kBad);
  EXPECT_EQ(code(kc::DenseLinearBf16(wp, 8, 8, xp, 1, nullptr, nullptr)), kBad);
  const absl::Status s = kc::DenseLinearBf16(wp, 8, 8, xp, -3, y.data(), nullptr);
  EXPECT_NE(std::string(s.message()).find("-3"), std::string::npos) << s.message();
  // y untouched by the rejected calls.
  for (const float v : ToHost(y)) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace sparkserve::gpu_test
