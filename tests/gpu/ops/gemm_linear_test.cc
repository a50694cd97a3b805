// GPU GEMM linear (kernels/cuda/gemm_linear.h; on sm_90a both the wgmma and the mma.sync kernel)
// against a CPU reference in double on the exact
// dequantised weights (quant/e2m1.h, e4m3.h codecs) and the f16-rounded activations: NVFP4 (with
// per-row divisors of a fused gate|up) and per-channel FP8, rows 1..2048 (one- and multi-split
// plans, partial activation and weight blocks), the 4B's shapes and small odd ones, all three
// epilogues, NaN-poisoned outputs, bad arguments, and the workspace bound.
#include "kernels/cuda/gemm_linear.h"

#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu/ops/linear_test_util.h"

namespace sparkserve::gpu_test {
namespace {

using namespace linear_test;  // NOLINT(google-build-using-namespace): the shared checks

// Both GEMM kernels where the device runs both (sm_90a: wgmma by default, mma.sync forced).
std::vector<LinearPath> GemmPaths() {
  if (kc::DeviceRunsWgmma()) return {LinearPath::kGemm, LinearPath::kGemmMma};
  return {LinearPath::kGemm};
}
const std::vector<int> kRows = {1, 9, 16, 33, 64, 65, 100, 257, 2048};

TEST(GemmLinearTest, Nvfp4SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(101);
  for (const LinearPath path : GemmPaths()) {
    CheckStore(path, MakeNvfp4({40}, 128, rng), kRows, 1);          // out not a multiple of 16, one K step
    CheckStore(path, MakeNvfp4({120, 80}, 256, rng), kRows, 2);     // fused parts, per-row divisors
    CheckStore(path, MakeNvfp4({24}, 1024, rng), {1, 9, 40, 300}, 3);  // K splits on a single weight block
    CheckStore(path, MakeNvfp4({136}, 384, rng), {9, 129}, 4);       // a partial second weight block
  }
}

TEST(GemmLinearTest, Fp8SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(102);
  for (const LinearPath path : GemmPaths()) {
    CheckStore(path, MakeFp8(24, 64, rng), kRows, 5);
    CheckStore(path, MakeFp8(40, 192, rng), kRows, 6);
    CheckStore(path, MakeFp8(200, 1024, rng), {1, 9, 40, 300}, 7);
  }
}

TEST(GemmLinearTest, Nvfp4GateUpOf4B) {  // fused gate|up 2560 -> 2 x 9216, two global scales
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(103);
  for (const LinearPath path : GemmPaths()) {
    CheckStore(path, MakeNvfp4({9216, 9216}, 2560, rng), kRows, 8);
  }
}

TEST(GemmLinearTest, Nvfp4DownOf4B) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(104);
  for (const LinearPath path : GemmPaths()) {
    CheckStore(path, MakeNvfp4({2560}, 9216, rng), kRows, 9);
  }
}

TEST(GemmLinearTest, Fp8ShapesOf4B) {  // GDN in_proj_qkvz and out_proj
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(105);
  for (const LinearPath path : GemmPaths()) {
    CheckStore(path, MakeFp8(12288, 2560, rng), kRows, 10);
    CheckStore(path, MakeFp8(2560, 4096, rng), kRows, 11);
  }
}

TEST(GemmLinearTest, SwiGluEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(106);
  for (const LinearPath path : GemmPaths()) {
    CheckSwiGlu(path, MakeNvfp4({9216, 9216}, 2560, rng), {9, 100, 2048}, 12);
    CheckSwiGlu(path, MakeFp8(200, 256, rng), {9, 33, 257}, 13);  // F = 100: gate and up share a weight tile
    CheckSwiGlu(path, MakeFp8(512, 384, rng), {65, 300}, 16);     // F = 256: wgmma's fused SwiGLU, partial rows
  }
}

TEST(GemmLinearTest, AddRmsNormEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(107);
  for (const LinearPath path : GemmPaths()) {
    CheckAddRmsNorm(path, MakeFp8(2560, 4096, rng), {9, 64, 257}, 14);  // GDN out_proj of the 4B
    CheckAddRmsNorm(path, MakeNvfp4({200}, 256, rng), {9, 100}, 15);
  }
}

TEST(GemmLinearTest, WorkspaceCoversEverySmallerCall) {
  ASSERT_TRUE(HasCudaDevice());
  for (const auto& [out, in] : std::vector<std::pair<int, int>>{{40, 128}, {2560, 9216}, {18432, 2560}, {200, 4096}}) {
    size_t prev = 0;
    for (int rows = 1; rows <= 2000; ++rows) {
      const size_t b = kc::GemmLinearWorkspaceBytes(out, in, rows);
      // Never shrinks (one buffer serves every step) and holds the unsummed output at least.
      ASSERT_GE(b, prev) << out << "x" << in << " rows " << rows;
      ASSERT_GE(b, static_cast<size_t>(rows) * out * sizeof(float)) << out << "x" << in << " rows " << rows;
      prev = b;
    }
  }
}

TEST(GemmLinearTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(108);
  TestLinear nv = MakeNvfp4({40}, 128, rng), f8 = MakeFp8(40, 64, rng);
  DeviceBuffer<__half> x = ToDevice(std::vector<__half>(16 * 128 + 8, __float2half(1.f)));
  DeviceBuffer<float> y = Poisoned<float>(16 * 40);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::GemmLinearWorkspaceBytes(40, 128, 16));
  ASSERT_TRUE(ws.ok());
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  constexpr LinearPath kPath = LinearPath::kGemm;
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(nv.Run(kPath, x.data(), 0, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(f8.Run(kPath, x.data(), -2, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(nv.Run(kPath, nullptr, 9, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(nv.Run(kPath, x.data() + 1, 9, y.data(), ws->data())), kBad);  // x not 16-byte aligned
  EXPECT_EQ(code(nv.Run(kPath, x.data(), 9, nullptr, ws->data())), kBad);      // kStore without y
  kc::DecodeEpilogue swiglu;
  swiglu.kind = kc::DecodeEpilogue::Kind::kSwiGlu;  // no x_out
  EXPECT_EQ(code(f8.Run(kPath, x.data(), 9, nullptr, ws->data(), swiglu)), kBad);
  kc::DecodeEpilogue norm;
  norm.kind = kc::DecodeEpilogue::Kind::kAddRmsNorm;  // no residual / weights
  EXPECT_EQ(code(f8.Run(kPath, x.data(), 9, nullptr, ws->data(), norm)), kBad);
  kc::DecodeEpilogue odd_swiglu = swiglu;  // out must be even
  auto half_out = DeviceBuffer<__half>::Allocate(16 * 40);
  ASSERT_TRUE(half_out.ok());
  odd_swiglu.x_out = half_out->data();
  kc::Fp8LinearDevice odd = f8.f8;
  odd.out = 39;
  EXPECT_EQ(code(kc::Fp8GemmLinear(odd, x.data(), 9, nullptr, ws->data(), nullptr, odd_swiglu)), kBad);
  kc::Nvfp4LinearDevice bad_in = nv.nv;
  bad_in.in = 64;  // NVFP4 needs in % 128 == 0
  const absl::Status s = kc::Nvfp4GemmLinear(bad_in, x.data(), 9, y.data(), ws->data(), nullptr);
  EXPECT_EQ(s.code(), kBad);
  EXPECT_NE(std::string(s.message()).find("128"), std::string::npos) << s.message();
  kc::Nvfp4LinearDevice no_scale = nv.nv;
  no_scale.global_scale = 0.f;
  EXPECT_EQ(code(kc::Nvfp4GemmLinear(no_scale, x.data(), 9, y.data(), ws->data(), nullptr)), kBad);
  // A split plan (40 outputs, in 1024 -> several K splits at 9 rows) without a workspace.
  TestLinear deep = MakeFp8(40, 1024, rng);
  DeviceBuffer<__half> xd = ToDevice(std::vector<__half>(9 * 1024, __float2half(1.f)));
  EXPECT_EQ(code(deep.Run(kPath, xd.data(), 9, y.data(), nullptr)), kBad);
  // y untouched by the rejected calls.
  for (const float v : ToHost(y)) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace sparkserve::gpu_test
