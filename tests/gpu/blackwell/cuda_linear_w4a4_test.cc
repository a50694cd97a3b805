// CudaLinear's w4a4_prefill option on an sm_120/sm_121 GPU: an NVFP4 module with input_global_scale
// uploads the W4A4 layout (its documented size), runs rows > 8 through the W4A4 GEMM (checked against
// the CPU emulation) and rows <= 8 through the W4A16 decode kernel; fused parts with different input
// scales, modules without one, and the option off keep the W4A16 path only.
#include <cstring>

#include "model/cuda/cuda_linear.h"
#include "quant/quantized_linear.h"
#include "tests/gpu/w4a4_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;
using model::cuda::CudaLinear;
using model::cuda::CudaLinearOptions;

quant::QuantizedLinear ModuleOf(const Nvfp4Weight& w, const std::string& name, float input_gs) {
  quant::QuantizedLinear m;
  m.name = name;
  m.format = quant::WeightFormat::kNvfp4;
  m.out = w.out;
  m.in = w.in;
  m.weight = core::Tensor::Empty({w.out, w.in / 2}, core::DType::kU8);
  std::memcpy(m.weight.raw_data(), w.packed.data(), w.packed.size());
  m.weight_scale = core::Tensor::Empty({w.out, w.in / 16}, core::DType::kF8E4M3);
  std::memcpy(m.weight_scale.raw_data(), w.scales.data(), w.scales.size());
  const float wgs = w.row_global_scale[0];
  m.weight_global_scale = core::Tensor::FromF32({1}, std::span<const float>(&wgs, 1));
  if (input_gs > 0.f) m.input_global_scale = core::Tensor::FromF32({1}, std::span<const float>(&input_gs, 1));
  return m;
}

TEST(CudaLinearW4A4Test, PrefillRowsRunTheW4A4Gemm) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_TRUE(kc::W4A4LinearSupportedOnCurrentDevice()) << "needs an sm_120/sm_121 GPU";
  std::mt19937 rng(51);
  const int out = 200, in = 384, rows = 40;
  const Nvfp4Weight w = RandomNvfp4Weight(out, in, rng);
  const quant::QuantizedLinear m = ModuleOf(w, "layers.0.mlp.down_proj", kTestInputGlobalScale);
  auto l = CudaLinear::Upload(m, CudaLinearOptions{.w4a4_prefill = true});
  GPU_ASSERT_OK(l.status());
  ASSERT_TRUE(l->has_w4a4());
  EXPECT_EQ(l->w4a4_bytes(), static_cast<int64_t>((out + 15) / 16 * 16) * in * 9 / 16);
  std::vector<float> xf;
  DeviceBuffer<__half> x = ToDevice(RandomActivations(rows, in, rng, &xf));
  DeviceBuffer<float> y = PoisonedF32(static_cast<size_t>(rows) * out);
  auto ws = DeviceBuffer<uint8_t>::Allocate(l->workspace_bytes(rows));
  ASSERT_TRUE(ws.ok());
  GPU_ASSERT_OK(l->Run(x.data(), rows, y.data(), ws->data(), nullptr));
  const std::vector<int> cols = SampledColumns(out, 1);
  EXPECT_CLOSE(ToHost(y), ToFloat(EmulateW4A4Linear(w, xf, rows, kTestInputGlobalScale, cols)), 2e-3,
               "CudaLinear W4A4 rows 40");
  // 8 rows take the W4A16 decode kernel: its f16 activations are not quantised, so its output must
  // differ from the W4A4 result of the same rows.
  DeviceBuffer<float> y8 = PoisonedF32(static_cast<size_t>(8) * out);
  GPU_ASSERT_OK(l->Run(x.data(), 8, y8.data(), ws->data(), nullptr));
  const std::vector<float> got8 = ToHost(y8), w4a4 = ToHost(y);
  double diff = 0;
  for (size_t i = 0; i < got8.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got8[i])) << i;
    diff = std::max(diff, static_cast<double>(std::abs(got8[i] - w4a4[i])));
  }
  EXPECT_GT(diff, 0.0) << "rows <= 8 should take the W4A16 decode path";
}

TEST(CudaLinearW4A4Test, OnlyModulesWithOneSharedInputScaleGetTheLayout) {
  ASSERT_TRUE(HasCudaDevice());
  ASSERT_TRUE(kc::W4A4LinearSupportedOnCurrentDevice()) << "needs an sm_120/sm_121 GPU";
  std::mt19937 rng(52);
  const Nvfp4Weight a = RandomNvfp4Weight(32, 256, rng), b = RandomNvfp4Weight(48, 256, rng);
  const quant::QuantizedLinear qa = ModuleOf(a, "q", 100.f), qb_same = ModuleOf(b, "k", 100.f),
                               qb_other = ModuleOf(b, "k", 90.f), q_none = ModuleOf(a, "v", 0.f);
  const CudaLinearOptions on{.w4a4_prefill = true};
  const quant::QuantizedLinear* same[] = {&qa, &qb_same};
  const quant::QuantizedLinear* differ[] = {&qa, &qb_other};
  auto fused = CudaLinear::UploadFused(same, "qk", on);
  GPU_ASSERT_OK(fused.status());
  EXPECT_TRUE(fused->has_w4a4());
  auto mixed = CudaLinear::UploadFused(differ, "qk", on);
  GPU_ASSERT_OK(mixed.status());
  EXPECT_FALSE(mixed->has_w4a4());
  auto none = CudaLinear::Upload(q_none, on);
  GPU_ASSERT_OK(none.status());
  EXPECT_FALSE(none->has_w4a4());
  auto off = CudaLinear::Upload(qa);
  GPU_ASSERT_OK(off.status());
  EXPECT_FALSE(off->has_w4a4());
  EXPECT_EQ(off->w4a4_bytes(), 0);
}

}  // namespace
}  // namespace sparkserve::gpu_test
