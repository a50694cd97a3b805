// ThreadPool: every index visited exactly once, for many sizes and grains.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

namespace sparkserve::core {
namespace {

TEST(ThreadPool, VisitsEveryIndexOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 3, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << grain;
    }
  }
}

}  // namespace
}  // namespace sparkserve::core
