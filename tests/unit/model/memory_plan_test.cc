// PlanKvPages: budget arithmetic, the cap at max_batch full sequences, and the refusal that names
// what to lower.
#include "model/memory_plan.h"

#include <gtest/gtest.h>

#include <string>

namespace sparkserve::model {
namespace {

KvMemoryRequest Request() {
  KvMemoryRequest r;
  r.utilization = 0.5;
  r.device_total = 100'000'000;
  r.device_free = 80'000'000;  // 20 MB in use: budget 50 - 20 = 30 MB
  r.page_bytes = 1'000'000;
  r.page_size = 16;
  r.max_seq_len = 64;          // 4 pages a sequence
  r.max_batch = 100;
  return r;
}

TEST(PlanKvPages, GivesTheKvCacheWhatIsLeftOfTheBudget) {
  auto pages = PlanKvPages(Request());
  ASSERT_TRUE(pages.ok()) << pages.status();
  EXPECT_EQ(*pages, 30);
}

TEST(PlanKvPages, NeverMoreThanMaxBatchFullSequences) {
  KvMemoryRequest r = Request();
  r.max_batch = 3;  // 12 pages
  EXPECT_EQ(*PlanKvPages(r), 12);
}

TEST(PlanKvPages, RefusesWhenOneSequenceDoesNotFitAndSaysWhatToLower) {
  KvMemoryRequest r = Request();
  r.max_seq_len = 16 * 31;  // 31 pages > 30
  auto pages = PlanKvPages(r);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(pages.status().message());
  for (const char* needle : {"31 pages", "--max-seq-len", "--gpu-memory-utilization", "496-token"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << m << " lacks " << needle;
  }
  r.max_seq_len = 64;
  r.device_free = 40'000'000;  // 60 MB in use: over the 50 MB budget already
  EXPECT_FALSE(PlanKvPages(r).ok());
}

TEST(PlanKvPages, RejectsUtilizationOutsideTheUnitInterval) {
  for (const double u : {0.0, -0.1, 1.5}) {
    KvMemoryRequest r = Request();
    r.utilization = u;
    EXPECT_EQ(PlanKvPages(r).status().code(), absl::StatusCode::kInvalidArgument) << u;
  }
}

TEST(PlanKvPages, ModelsWithoutAttentionNeedNoBudget) {
  KvMemoryRequest r = Request();
  r.page_bytes = 0;
  r.max_batch = 2;
  EXPECT_EQ(*PlanKvPages(r), 8);
}

}  // namespace
}  // namespace sparkserve::model
