// gpu_blackwell_test: the W4A4 linear with the hardware block-scaled FP4 mma.sync
// (kernels/cuda/w4a4_linear.h) against the CPU emulation in double, and against the software
// model of the instruction that gpu_ops_test runs everywhere. Only meaningful on sm_120 / sm_121:
// tests/gpu/run.sh runs it where nvidia-smi reports compute capability 12.x and otherwise records
// "not run". Every test fails (never skips) when started elsewhere.
#include <cuda_runtime_api.h>

#include "kernels/cuda/w4a4_linear.h"
#include "tests/gpu/w4a4_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;
constexpr kc::W4A4Mma kHw = kc::W4A4Mma::kHardware;
// The tensor cores' accumulation inside an mma need not be full fp32 (Hopper's FP8 mma keeps ~14
// mantissa bits): a looser bound than the software model's 1e-4, still far below what a wrong
// fragment or scale layout gives (errors of order 1).
constexpr double kTol = 2e-3;

// Fails the test unless the device has the instruction.
#define ASSERT_BLACKWELL()                                                                                  \
  do {                                                                                                      \
    ASSERT_TRUE(HasCudaDevice());                                                                           \
    ASSERT_TRUE(kc::W4A4LinearSupportedOnCurrentDevice()) << "gpu_blackwell_test needs an sm_120/sm_121 GPU"; \
  } while (0)

TEST(W4A4BlackwellTest, SmallAndPartialTilesMatchTheEmulation) {
  ASSERT_BLACKWELL();
  std::mt19937 rng(41);
  CheckW4A4Store(1, 16, 128, 1, 1, kHw, rng, kTol);
  CheckW4A4Store(9, 48, 128, 1, 1, kHw, rng, kTol);
  CheckW4A4Store(131, 200, 384, 1, 1, kHw, rng, kTol);
  CheckW4A4Store(64, 40, 256, 2, 1, kHw, rng, kTol);
  CheckW4A4Store(kc::kW4a4ChunkRows + 77, 72, 256, 3, 1, kHw, rng, kTol);
}

TEST(W4A4BlackwellTest, ModelShapesMatchTheEmulation) {
  ASSERT_BLACKWELL();
  std::mt19937 rng(42);
  CheckW4A4Store(130, 2560, 2560, 1, 7, kHw, rng, kTol);
  CheckW4A4Store(40, 2560, 9216, 1, 13, kHw, rng, kTol);
  CheckW4A4Store(24, 18432, 2560, 2, 61, kHw, rng, kTol);  // fused gate|up
  CheckW4A4Store(20, 2560, 4096, 1, 11, kHw, rng, kTol);
}

TEST(W4A4BlackwellTest, EpiloguesMatchTheEmulation) {
  ASSERT_BLACKWELL();
  std::mt19937 rng(43);
  for (const int rows : {9, 140}) CheckW4A4Epilogues(rows, 256, kHw, rng);
}

// The instruction against its software model on identical inputs: any difference in fragment or
// scale-factor layout shows up here as a large error even where the emulation check is loose.
TEST(W4A4BlackwellTest, HardwareMatchesTheSoftwareModel) {
  ASSERT_BLACKWELL();
  std::mt19937 rng(44);
  for (const auto& [rows, out, in] : {std::tuple{17, 48, 128}, {200, 264, 640}}) {
    W4A4Linear l = UploadRandomW4A4(out, in, kTestInputGlobalScale, rng);
    std::vector<float> xf;
    DeviceBuffer<__half> x = ToDevice(RandomActivations(rows, in, rng, &xf));
    auto ws = DeviceBuffer<uint8_t>::Allocate(kc::W4A4LinearWorkspaceBytes(out, in, rows));
    ASSERT_TRUE(ws.ok());
    DeviceBuffer<float> y_hw = PoisonedF32(static_cast<size_t>(rows) * out), y_model = PoisonedF32(static_cast<size_t>(rows) * out);
    GPU_ASSERT_OK(kc::Nvfp4W4A4Linear(l.device, x.data(), rows, y_hw.data(), ws->data(), nullptr, {}, kHw));
    GPU_ASSERT_OK(kc::Nvfp4W4A4Linear(l.device, x.data(), rows, y_model.data(), ws->data(), nullptr, {},
                                      kc::W4A4Mma::kSoftwareModel));
    const std::vector<float> model = ToHost(y_model);
    EXPECT_CLOSE(ToHost(y_hw), model, kTol,
                 "hardware vs software mma, rows " + std::to_string(rows) + " out " + std::to_string(out));
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test
