// GlooCollective's device path: device buffers staged through pinned host memory, ordered on the
// caller's stream. Two ranks as two threads of one process on one GPU (what NCCL refuses): the sum
// and the gather of fresh random device data equal the host's, on each rank's own stream.
#include <thread>

#include "core/gloo_collective.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

TEST(GlooStagedDevicePath, AllReduceAndAllGatherOnDeviceBuffersEqualTheHost) {
  constexpr int32_t kWorld = 2;
  constexpr size_t kCount = 5000;
  std::vector<std::vector<float>> inputs(kWorld), sums(kWorld), gathers(kWorld);
  std::mt19937 rng(17);
  for (auto& in : inputs) in = RandomF32(kCount, rng);
  core::InMemoryRendezvousStore store;
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      core::GlooOptions o;
      o.rank = r;
      o.world = kWorld;
      auto group = core::GlooCollective::Create(o, store);
      ASSERT_TRUE(group.ok()) << std::string(group.status().message());
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
      DeviceBuffer<float> data = ToDevice(inputs[r]);
      GPU_ASSERT_OK((*group)->AllReduceSumDevice(data.data(), kCount, stream));
      DeviceBuffer<float> local = ToDevice(inputs[r]);
      DeviceBuffer<float> all = PoisonedF32(kCount * kWorld);
      GPU_ASSERT_OK((*group)->AllGatherDevice(local.data(), kCount, all.data(), stream));
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      sums[r] = ToHost(data);
      gathers[r] = ToHost(all);
      cudaStreamDestroy(stream);
      EXPECT_NE((*group)->transport().find("staged through host memory"), std::string::npos);
    });
  }
  for (auto& t : threads) t.join();
  std::vector<float> want_sum(kCount), want_gather;
  for (size_t i = 0; i < kCount; ++i) want_sum[i] = inputs[0][i] + inputs[1][i];
  for (const auto& in : inputs) want_gather.insert(want_gather.end(), in.begin(), in.end());
  for (int32_t r = 0; r < kWorld; ++r) {
    EXPECT_LE(RelativeError(sums[r], want_sum), 1e-6) << "rank " << r;
    EXPECT_EQ(gathers[r], want_gather) << "rank " << r;
    EXPECT_EQ(sums[r], sums[0]) << "every rank holds the same bits";
  }
}

}  // namespace
}  // namespace sparkserve::gpu_test
