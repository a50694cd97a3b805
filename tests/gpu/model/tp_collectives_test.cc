// gpu_tp_test's collective checks on one GPU: core::InProcessGroup's device path (two threads,
// device buffers staged through host memory), and NCCL (core/nccl_collective.h) as far as one GPU
// allows: a one-rank group (device all-reduce and gather, an all-reduce captured into a CUDA graph,
// the host path, abort on request), a two-rank group whose peer never joins failing
// DeadlineExceeded within its timeout instead of hanging, bad arguments refused.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/collective.h"
#include "kernels/cuda/device_buffer.h"
#ifdef SPARKSERVE_WITH_NCCL
#include "core/nccl_collective.h"
#endif

namespace sparkserve::core {
namespace {

// The in-process group's device path: two threads, device buffers on one GPU.
TEST(InProcessDeviceCollective, SumsAndGathersDeviceBuffers) {
  InProcessGroup group(2);
  std::vector<std::vector<float>> sums(2), gathers(2);
  std::vector<absl::Status> status(2);
  auto rank = [&](int q) {
    cudaStream_t stream = nullptr;
    cudaStreamCreate(&stream);
    std::vector<float> host = {1.0f + q, 10.0f * (q + 1), -3.0f};
    auto buf = kernels::cuda::DeviceBuffer<float>::FromHost(host);
    auto out = kernels::cuda::DeviceBuffer<float>::Zeros(6);
    if (!buf.ok() || !out.ok()) {
      status[q] = absl::InternalError("alloc");
      return;
    }
    status[q] = group.rank(q).AllGatherDevice(buf->data(), 3, out->data(), stream);
    if (status[q].ok()) status[q] = group.rank(q).AllReduceSumDevice(buf->data(), 3, stream);
    if (status[q].ok()) status[q] = group.rank(q).WaitDevice(stream);
    sums[q].resize(3);
    gathers[q].resize(6);
    cudaMemcpy(sums[q].data(), buf->data(), 3 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(gathers[q].data(), out->data(), 6 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaStreamDestroy(stream);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int q = 0; q < 2; ++q) {
    ASSERT_TRUE(status[q].ok()) << status[q];
    EXPECT_EQ(sums[q], (std::vector<float>{3.0f, 30.0f, -6.0f}));
    EXPECT_EQ(gathers[q], (std::vector<float>{1.0f, 10.0f, -3.0f, 2.0f, 20.0f, -3.0f}));
  }
}

#ifdef SPARKSERVE_WITH_NCCL
// One rank: NCCL's communicator, its device all-reduce and gather (identities), one captured into a
// CUDA graph, and an abort on request failing the next call.
TEST(NcclCollectiveOnOneGpu, OneRankGroupWorksAndAbortsOnRequest) {
  auto id = NcclCollective::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  auto nccl = NcclCollective::Create(0, 1, *id, 0, std::chrono::seconds(20));
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  NcclCollective& c = **nccl;
  EXPECT_TRUE(c.device_capturable());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const std::vector<float> host = {1.5f, -2.0f, 4.0f};
  auto buf = kernels::cuda::DeviceBuffer<float>::FromHost(host);
  auto out = kernels::cuda::DeviceBuffer<float>::Zeros(3);
  ASSERT_TRUE(buf.ok() && out.ok());
  ASSERT_TRUE(c.AllReduceSumDevice(buf->data(), 3, stream).ok());
  ASSERT_TRUE(c.AllGatherDevice(buf->data(), 3, out->data(), stream).ok());
  // Captured: the all-reduce inside a graph, replayed twice.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  const absl::Status captured = c.AllReduceSumDevice(buf->data(), 3, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_TRUE(c.WaitDevice(stream).ok());
  std::vector<float> back(3), gathered(3);
  ASSERT_EQ(cudaMemcpy(back.data(), buf->data(), 12, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(gathered.data(), out->data(), 12, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  EXPECT_EQ(gathered, host);
  std::vector<float> host_sum = {2.0f, 3.0f};
  ASSERT_TRUE(c.AllReduceSum(host_sum).ok());
  EXPECT_EQ(host_sum, (std::vector<float>{2.0f, 3.0f}));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  c.RequestAbort("the test asked");
  const absl::Status after = c.AllReduceSumDevice(buf->data(), 3, stream);
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_NE(std::string(after.message()).find("the test asked"), std::string::npos) << after;
  EXPECT_TRUE(c.failed());
  cudaStreamDestroy(stream);
}

// A group of two whose other rank never joins: Create fails DeadlineExceeded within its timeout
// (plus a margin), having aborted the communicator, instead of waiting forever.
TEST(NcclCollectiveOnOneGpu, APeerThatNeverJoinsFailsWithinTheTimeout) {
  auto id = NcclCollective::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const auto start = std::chrono::steady_clock::now();
  auto nccl = NcclCollective::Create(0, 2, *id, 0, std::chrono::seconds(3));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kDeadlineExceeded) << nccl.status();
  EXPECT_LT(took, 13.0) << "Create took " << took << " s with a 3 s timeout";
}

TEST(NcclCollectiveOnOneGpu, BadArgumentsAreRefusedBeforeTouchingNccl) {
  EXPECT_EQ(NcclCollective::Create(2, 2, std::string(128, 'x'), 0, std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclCollective::Create(0, 2, "short", 0, std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclCollective::Create(0, 2, std::string(128, 'x'), 0, std::chrono::seconds(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}
#endif

}  // namespace
}  // namespace sparkserve::core
