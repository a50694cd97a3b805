// DeviceBuffer round trips (the base every other GPU op test stands on).
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

TEST(DeviceBufferTest, RoundTripsAndZeroes) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(1);
  const std::vector<float> host = RandomF32(1000, rng);
  DeviceBuffer<float> d = ToDevice(host);
  EXPECT_EQ(ToHost(d), host);
  auto z = DeviceBuffer<int32_t>::Zeros(17);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(ToHost(*z), std::vector<int32_t>(17, 0));
}

}  // namespace
}  // namespace sparkserve::gpu_test
