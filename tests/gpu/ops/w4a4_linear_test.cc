// The W4A4 linear (kernels/cuda/w4a4_linear.h) on any GPU: the whole data flow (GPU activation
// quantisation, the GEMM's cp.async staging, fragment loads, chunking over rows, stores and the
// epilogues) with the mma replaced by its software model, against the CPU emulation in double.
// The hardware instruction itself is gpu_blackwell_test's (tests/gpu/blackwell/); here it must be
// refused with FailedPrecondition on a device without it (and run correctly on one with it).
#include <cuda_runtime_api.h>

#include <limits>

#include "kernels/cuda/w4a4_linear.h"
#include "tests/gpu/w4a4_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;
constexpr kc::W4A4Mma kModel = kc::W4A4Mma::kSoftwareModel;

TEST(W4A4LinearModelTest, SmallAndPartialTilesMatchTheEmulation) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(31);
  CheckW4A4Store(1, 16, 128, 1, 1, kModel, rng, 1e-4);
  CheckW4A4Store(9, 48, 128, 1, 1, kModel, rng, 1e-4);
  CheckW4A4Store(131, 200, 384, 1, 1, kModel, rng, 1e-4);  // partial weight and token tiles
  CheckW4A4Store(64, 40, 256, 2, 1, kModel, rng, 1e-4);    // fused: two weight global scales
}

TEST(W4A4LinearModelTest, RowsPastOneChunkLoop) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(32);
  CheckW4A4Store(kc::kW4a4ChunkRows + 77, 72, 256, 3, 1, kModel, rng, 1e-4);
}

TEST(W4A4LinearModelTest, ModelShapesMatchTheEmulation) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(33);
  CheckW4A4Store(130, 2560, 2560, 1, 7, kModel, rng, 1e-4);   // hidden -> hidden
  CheckW4A4Store(40, 2560, 9216, 1, 13, kModel, rng, 1e-4);   // MLP down
  CheckW4A4Store(24, 8192, 2560, 1, 29, kModel, rng, 1e-4);   // q_proj with its gate
  CheckW4A4Store(20, 2560, 4096, 1, 11, kModel, rng, 1e-4);   // attention o_proj
}

TEST(W4A4LinearModelTest, EpiloguesMatchTheEmulation) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(34);
  for (const int rows : {9, 140}) CheckW4A4Epilogues(rows, 256, kModel, rng);
}

TEST(W4A4LinearModelTest, HardwareMmaOnlyOnSm120AndSm121) {
  ASSERT_TRUE(HasCudaDevice());
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  EXPECT_EQ(kc::W4A4LinearSupportedOnCurrentDevice(), major == 12);
  std::mt19937 rng(35);
  if (major == 12) {  // the instruction exists: it must also be right
    CheckW4A4Store(33, 64, 256, 1, 1, kc::W4A4Mma::kHardware, rng, 2e-3);  // see gpu_blackwell_test's kTol
    return;
  }
  W4A4Linear l = UploadRandomW4A4(32, 128, kTestInputGlobalScale, rng);
  DeviceBuffer<__half> x = ToDevice(std::vector<__half>(16 * 128, __float2half(1.f)));
  DeviceBuffer<float> y = PoisonedF32(16 * 32);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::W4A4LinearWorkspaceBytes(32, 128, 16));
  ASSERT_TRUE(ws.ok());
  const absl::Status s = kc::Nvfp4W4A4Linear(l.device, x.data(), 16, y.data(), ws->data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << std::string(s.message());
  EXPECT_NE(std::string(s.message()).find("sm_120"), std::string::npos) << std::string(s.message());
}

TEST(W4A4LinearModelTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(36);
  W4A4Linear l = UploadRandomW4A4(32, 128, kTestInputGlobalScale, rng);
  DeviceBuffer<__half> x = ToDevice(std::vector<__half>(16 * 128, __float2half(1.f)));
  DeviceBuffer<float> y = PoisonedF32(16 * 32);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::W4A4LinearWorkspaceBytes(32, 128, 16));
  ASSERT_TRUE(ws.ok());
  auto code_of = [&](kc::Nvfp4W4A4LinearDevice w, int rows, float* yp, kc::DecodeEpilogue e) {
    return kc::Nvfp4W4A4Linear(w, x.data(), rows, yp, ws->data(), nullptr, e, kModel).code();
  };
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code_of(l.device, 0, y.data(), {}), kBad);
  kc::Nvfp4W4A4LinearDevice w = l.device;
  w.in = 64;  // not a multiple of 128
  EXPECT_EQ(code_of(w, 16, y.data(), {}), kBad);
  w = l.device;
  w.input_global_scale = 0.f;
  EXPECT_EQ(code_of(w, 16, y.data(), {}), kBad);
  w.input_global_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(code_of(w, 16, y.data(), {}), kBad);
  w = l.device;
  w.weight_global_scale = -1.f;
  EXPECT_EQ(code_of(w, 16, y.data(), {}), kBad);
  w = l.device;
  w.codes = nullptr;
  EXPECT_EQ(code_of(w, 16, y.data(), {}), kBad);
  EXPECT_EQ(code_of(l.device, 16, nullptr, {}), kBad);  // kStore without y
  kc::DecodeEpilogue e;
  e.kind = kc::DecodeEpilogue::Kind::kAddRmsNorm;  // no residual / norm weight / output
  EXPECT_EQ(code_of(l.device, 16, nullptr, e), kBad);
}

}  // namespace
}  // namespace sparkserve::gpu_test
