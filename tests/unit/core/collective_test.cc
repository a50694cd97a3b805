// core::InProcessGroup's device path with host memory standing in for device memory (a
// DeviceStaging of plain copies): the sum and gather every rank sees, and a rank whose copy fails
// failing every rank rather than leaving the others waiting. Without staging (a build without
// CUDA) the device methods refuse with FailedPrecondition. The CUDA staging itself runs in
// tests/gpu/model/cuda_tp_test.cc.
#include "core/collective.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace sparkserve::core {
namespace {

class HostStaging : public DeviceStaging {
 public:
  explicit HostStaging(int fail_rank_marker = -1) : fail_marker_(fail_rank_marker) {}
  absl::Status Wait(void*) override {
    ++waits;
    return absl::OkStatus();
  }
  absl::Status ToHost(const float* device, size_t count, float* host, void* stream) override {
    // The "stream" carries the rank in these tests: one rank's copy down can be made to fail.
    if (fail_marker_ >= 0 && reinterpret_cast<intptr_t>(stream) == fail_marker_) {
      return absl::InternalError("copy down failed");
    }
    std::copy_n(device, count, host);
    return absl::OkStatus();
  }
  absl::Status ToDevice(const float* host, size_t count, float* device, void*) override {
    std::copy_n(host, count, device);
    return absl::OkStatus();
  }
  std::atomic<int> waits{0};

 private:
  intptr_t fail_marker_;
};

void* StreamOf(int rank) { return reinterpret_cast<void*>(static_cast<intptr_t>(rank + 1)); }

TEST(InProcessGroupDevice, EveryRankSeesTheSumAndTheGatherInRankOrder) {
  constexpr int kWorld = 3;
  auto staging = std::make_shared<HostStaging>();
  InProcessGroup group(kWorld, staging);
  std::vector<std::vector<float>> data(kWorld), gathered(kWorld, std::vector<float>(2 * kWorld));
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    data[r] = {static_cast<float>(r), 0.5f * static_cast<float>(r + 1)};
    threads.emplace_back([&, r] {
      Collective& c = group.rank(r);
      status[r] = c.AllGatherDevice(data[r].data(), 2, gathered[r].data(), StreamOf(r));
      if (status[r].ok()) status[r] = c.AllReduceSumDevice(data[r].data(), 2, StreamOf(r));
      if (status[r].ok()) status[r] = c.WaitDevice(StreamOf(r));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(data[r], (std::vector<float>{3.0f, 3.0f}));  // 0+1+2, 0.5+1+1.5
    EXPECT_EQ(gathered[r], (std::vector<float>{0.0f, 0.5f, 1.0f, 1.0f, 2.0f, 1.5f}));
  }
  EXPECT_EQ(staging->waits.load(), kWorld);
  EXPECT_FALSE(group.rank(0).device_capturable());  // host-staged: the runner replays graphs in segments
}

TEST(InProcessGroupDevice, ARankWhoseCopyFailsFailsEveryRank) {
  constexpr int kWorld = 2;
  InProcessGroup group(kWorld, std::make_shared<HostStaging>(/*fail_rank_marker=*/2));  // rank 1's stream
  std::vector<absl::Status> sum(kWorld), gather(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> x = {1.0f, 2.0f}, out(2 * kWorld);
      sum[r] = group.rank(r).AllReduceSumDevice(x.data(), 2, StreamOf(r));
      gather[r] = group.rank(r).AllGatherDevice(x.data(), 2, out.data(), StreamOf(r));
    });
  }
  for (std::thread& t : threads) t.join();  // returns: nobody waits for the failed rank
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(sum[r].ok()) << "rank " << r;
    EXPECT_FALSE(gather[r].ok()) << "rank " << r;
  }
  EXPECT_EQ(sum[1].code(), absl::StatusCode::kInternal);
}

TEST(InProcessGroupDevice, WithoutStagingTheDevicePathRefuses) {
  InProcessGroup group(1, nullptr);
  float x = 1.0f;
  EXPECT_EQ(group.rank(0).AllReduceSumDevice(&x, 1, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(group.rank(0).AllGatherDevice(&x, 1, &x, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(group.rank(0).transport(), "in-process");
}

}  // namespace
}  // namespace sparkserve::core
