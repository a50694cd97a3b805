// Engine with the prefix cache (FakeModelRunner checks the plan contract): multi-turn
// conversations resume from checkpoints and give the sequential reference's tokens, also with a
// KV pool so small that entries are evicted and sequences preempted; counts are honest.
#include "tests/unit/engine/engine_test_harness.h"

namespace sparkserve::engine {
namespace {

using namespace engine_test;  // NOLINT: the harness is this test's vocabulary

EngineConfig PrefixConfig(int32_t max_batch, int32_t step_tokens, int32_t interval) {
  EngineConfig config;
  config.scheduler = {.max_step_tokens = step_tokens, .prefill_chunk = 0, .max_batch = max_batch};
  config.scheduler.prefix.enabled = true;
  config.scheduler.prefix.checkpoint_interval = interval;
  config.scheduler.prefix.max_pages = 1 << 20;
  return config;
}

// Turn t of conversation c: the previous turn's prompt + its output + new user tokens.
void RunConversations(Harness& h, int conversations, int turns, bool expect_hits) {
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(conversations));
  const std::vector<int32_t> system = Prompt(40, 999);  // shared by every conversation
  for (int c = 0; c < conversations; ++c) {
    history[static_cast<size_t>(c)] = system;
  }
  for (int t = 0; t < turns; ++t) {
    std::vector<std::unique_ptr<Collector>> out;
    std::vector<int32_t> boundaries;
    for (int c = 0; c < conversations; ++c) {
      auto& hist = history[static_cast<size_t>(c)];
      // The previous turn's end: its last output token was sampled, never fed, so its entry ends
      // one token before.
      boundaries.push_back(static_cast<int32_t>(hist.size()) - 1);
      const std::vector<int32_t> user = Prompt(5 + c % 3, 100 * t + c);
      hist.insert(hist.end(), user.begin(), user.end());
      Request r = Greedy(hist, 6);
      r.cache_points = {static_cast<int32_t>(system.size()), static_cast<int32_t>(hist.size()) - 2};
      out.push_back(std::make_unique<Collector>());
      h.Submit(std::move(r), *out.back());
    }
    h.engine->Start();
    for (int c = 0; c < conversations; ++c) {
      Collector& col = *out[static_cast<size_t>(c)];
      ASSERT_TRUE(col.Wait()) << "conversation " << c << " turn " << t;
      auto& hist = history[static_cast<size_t>(c)];
      const std::vector<int32_t> want = ReferenceGreedy(hist, kVocab, 6);
      EXPECT_EQ(col.tokens(), want) << "conversation " << c << " turn " << t;
      const std::vector<TokenEvent> events = col.events();
      ASSERT_FALSE(events.empty());
      const int32_t cached = events.front().cached_tokens;
      EXPECT_LT(cached, static_cast<int32_t>(hist.size()));
      if (expect_hits && t > 0) {
        EXPECT_GE(cached, boundaries[static_cast<size_t>(c)]) << c << " turn " << t;
      }
      hist.insert(hist.end(), want.begin(), want.end());
    }
  }
}

TEST(PrefixCacheEngine, MultiTurnConversationsResumeAndMatchTheReference) {
  // 4 running + 12 checkpoint slots, plenty of pages.
  Harness h(Capacity(16, 256, 4), PrefixConfig(4, 256, 16));
  RunConversations(h, 4, 3, /*expect_hits=*/true);
  const EngineStats st = h.engine->Stats();
  EXPECT_GT(st.prefix_cache_hits, 0);
  EXPECT_GT(st.prefix_cache_queries, st.prefix_cache_hits);
  EXPECT_GT(st.prefix_cache_entries, 0);
  EXPECT_EQ(st.free_slots, st.total_slots);  // checkpoint slots are not sequence slots
  EXPECT_EQ(st.free_kv_pages + st.prefix_cache_pages, st.total_kv_pages);
  // Idle: every page the cache holds is held by it alone (kv_cache_usage_perc counts them free).
  EXPECT_EQ(st.prefix_cache_only_pages, st.prefix_cache_pages);
  EXPECT_GT(st.prefix_cache_only_pages, 0);
  EXPECT_TRUE(h.model->contract_errors().empty()) << h.model->contract_errors().front();
}

TEST(PrefixCacheEngine, ATinyPoolEvictsEntriesAndPreemptsYetMatchesTheReference) {
  // 40 KV pages of 4 positions for 4 sequences of up to ~110 tokens: entries are evicted for
  // running sequences, which are preempted too.
  Harness h(Capacity(8, 40, 4), PrefixConfig(4, 64, 8));
  RunConversations(h, 4, 4, /*expect_hits=*/false);
  const EngineStats st = h.engine->Stats();
  EXPECT_EQ(st.free_slots, st.total_slots);  // checkpoint slots are not sequence slots
  EXPECT_EQ(st.free_kv_pages + st.prefix_cache_pages, st.total_kv_pages);
  EXPECT_TRUE(h.model->contract_errors().empty()) << h.model->contract_errors().front();
}

}  // namespace
}  // namespace sparkserve::engine
