// Generate: the blocking helper over EngineApi (used by one-shot commands and benchmarks).
#include "tests/unit/engine/engine_test_harness.h"

namespace sparkserve::engine {
namespace {

using namespace engine_test;  // NOLINT: the harness is this test's vocabulary

TEST(Generate, BlocksUntilEverySampleFinishes) {
  EngineConfig config;
  config.eos_token_ids = {5};
  Harness h(Capacity(4, 64), config);
  h.engine->Start();
  Request r = Greedy(Prompt(6, 120), 12);
  r.n = 2;
  r.sampling.logprobs = 1;
  auto got = Generate(*h.engine, r);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  const std::vector<int32_t> want = ReferenceGreedy(Prompt(6, 120), kVocab, 12, {5});
  for (const GeneratedSample& s : *got) {
    EXPECT_EQ(s.ids, want);
    EXPECT_EQ(s.logprobs.size(), want.size());
    EXPECT_EQ(s.finish, want.back() == 5 ? FinishReason::kStop : FinishReason::kLength);
  }
  // Submit's errors come back as they are; a model error comes back as Internal with its message.
  EXPECT_EQ(Generate(*h.engine, Greedy({}, 3)).status().code(), absl::StatusCode::kInvalidArgument);
  h.model->FailNextForward();
  auto failed = Generate(*h.engine, Greedy(Prompt(3, 121), 3));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(failed.status().message()).find("injected device fault"), std::string::npos);
}

TEST(Generate, TimesOutAndCancels) {
  Harness h(Capacity(2, 6000, 16, 96000));
  h.engine->Start();
  auto got = Generate(*h.engine, Greedy(Prompt(3, 122), 90000), std::chrono::milliseconds(20));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  // The cancel frees its slot: the engine goes idle.
  for (int i = 0; i < 500 && h.engine->Stats().num_requests_running > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(h.engine->Stats().num_requests_running, 0);
  EXPECT_EQ(h.engine->Stats().requests_finished_abort, 1);
}

}  // namespace
}  // namespace sparkserve::engine
