// PrefixTree (the prefix cache's radix tree) and the scheduler's use of it: deepest match within a
// depth bound, edge splits, LRU eviction, pruning; a repeated prompt resumes from a checkpoint
// with its state copied and full KV pages shared.
#include "scheduler/prefix_tree.h"

#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "tests/unit/engine/fake_model_runner.h"

namespace sparkserve::scheduler {
namespace {

std::vector<int32_t> Seq(std::initializer_list<int32_t> t) { return t; }

TEST(PrefixTree, MatchesTheDeepestEntryWithinTheBound) {
  PrefixTree t;
  EXPECT_EQ(t.Match(Seq({1, 2, 3}), 3), nullptr);
  ASSERT_TRUE(t.Insert(Seq({1, 2}), 7, {10}));
  ASSERT_TRUE(t.Insert(Seq({1, 2, 3, 4}), 8, {10, 11}));
  EXPECT_FALSE(t.Insert(Seq({1, 2}), 9, {}));  // one entry per path
  const PrefixEntry* e = t.Match(Seq({1, 2, 3, 4, 5}), 4);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->depth, 4);
  EXPECT_EQ(e->slot, 8);
  e = t.Match(Seq({1, 2, 3, 4}), 3);  // the bound leaves a token to feed
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->slot, 7);
  e = t.Match(Seq({1, 2, 3, 9}), 4);  // diverges inside the edge 3,4
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->depth, 2);
  EXPECT_EQ(t.Match(Seq({2, 1}), 2), nullptr);
  EXPECT_EQ(t.Match(Seq({1}), 1), nullptr);
  EXPECT_TRUE(t.Contains(Seq({1, 2, 3, 4})));
  EXPECT_FALSE(t.Contains(Seq({1, 2, 3})));
}

TEST(PrefixTree, SplitsEdgesWhereInsertedPathsDiverge) {
  PrefixTree t;
  ASSERT_TRUE(t.Insert(Seq({5, 6, 7, 8}), 1, {}));
  ASSERT_TRUE(t.Insert(Seq({5, 6, 9}), 2, {}));  // splits 5,6,7,8 after 5,6
  ASSERT_TRUE(t.Insert(Seq({5, 6}), 3, {}));     // an entry on the split node itself
  EXPECT_EQ(t.num_entries(), 3);
  EXPECT_EQ(t.Match(Seq({5, 6, 7, 8, 1}), 10)->slot, 1);
  EXPECT_EQ(t.Match(Seq({5, 6, 9, 1}), 10)->slot, 2);
  EXPECT_EQ(t.Match(Seq({5, 6, 1}), 10)->slot, 3);
  EXPECT_EQ(t.Match(Seq({5, 6, 7}), 10)->slot, 3);
}

TEST(PrefixTree, EvictsLeastRecentlyUsedAndPrunesEmptyNodes) {
  PrefixTree t;
  ASSERT_TRUE(t.Insert(Seq({1, 2, 3}), 1, {4}));
  ASSERT_TRUE(t.Insert(Seq({1, 2, 5}), 2, {6}));
  ASSERT_TRUE(t.Insert(Seq({7}), 3, {}));
  t.Match(Seq({1, 2, 3}), 3);  // slot 1 is now the most recent
  auto e = t.EvictLru();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->slot, 2);
  EXPECT_EQ(e->pages, std::vector<int32_t>{6});
  const int64_t keep = t.Match(Seq({7}), 1)->id;  // slot 3 most recent, but kept anyway below
  e = t.EvictLru(keep);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->slot, 1);
  EXPECT_FALSE(t.EvictLru(keep));
  EXPECT_EQ(t.Clear().size(), 1u);
  EXPECT_EQ(t.num_entries(), 0);
  EXPECT_EQ(t.num_nodes(), 1);  // only the root is left
}

// The fake model's contract (slot history, page contents) with a repeated prompt: the second run
// resumes from the first's checkpoint, the state copied and full pages shared.
TEST(SchedulerPrefix, ARepeatedPromptResumesFromItsCheckpointWithSharedPages) {
  const model::ModelCapacity cap{6, 32, 4, 64, 256};  // 2 running + 4 checkpoint slots, pages of 4
  SchedulerConfig config{.max_step_tokens = 64, .prefill_chunk = 0, .max_batch = 2};
  config.prefix.enabled = true;
  config.prefix.checkpoint_interval = 8;
  config.prefix.max_pages = 32;
  auto sched = Scheduler::Create(config, cap);
  ASSERT_TRUE(sched.ok()) << sched.status();
  Scheduler& s = **sched;
  testing::FakeModelRunner model(cap);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 19; ++i) prompt.push_back((i * 5 + 3) % 64);
  auto run = [&](Sequence* seq) {  // prefill, then one token
    while (seq->num_generated() < 1) {
      ScheduledBatch b = s.Schedule();
      auto out = model.Run(b.plan);
      ASSERT_TRUE(out.ok()) << out.status();
      s.CommitStep(b);
      for (const ScheduledSeq& x : b.seqs) {
        if (x.samples) s.AppendToken(x.seq, 1);
      }
    }
  };
  Sequence* a = s.Add(1, 0, prompt, 4, {13});
  EXPECT_EQ(a->cache_points, (std::vector<int32_t>{8, 13, 16}));
  run(a);
  EXPECT_EQ(s.num_cache_entries(), 3);  // 8, 13, 16
  s.Free(a->id, /*cache=*/true);        // the end of its generation: entry 4
  EXPECT_EQ(s.num_cache_entries(), 4);
  EXPECT_EQ(s.num_free_slots(), 2);
  Sequence* b = s.Add(2, 0, prompt, 4, {13});
  ScheduledBatch batch = s.Schedule();
  ASSERT_EQ(batch.plan.seqs.size(), 1u);
  EXPECT_EQ(b->num_cached, 16);  // the deepest that leaves a prompt token to feed (19 is the whole prompt)
  EXPECT_EQ(batch.plan.seqs[0].start_pos, 16);
  ASSERT_EQ(batch.plan.copies.size(), 1u);
  EXPECT_TRUE(batch.plan.page_copies.empty());  // 16 is page aligned: all shared
  EXPECT_EQ(s.prefix_hits(), 16);
  EXPECT_EQ(s.prefix_queries(), 38);
  auto out = model.Run(batch.plan);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<int32_t> history(prompt.begin(), prompt.end());
  EXPECT_EQ(out->logits.dim(0), 1);
  const std::vector<float> want = testing::FakeLogits(history, 64);
  for (int v = 0; v < 64; ++v) EXPECT_EQ(out->logits.data<float>()[v], want[static_cast<size_t>(v)]);
  EXPECT_TRUE(model.contract_errors().empty());
  s.CommitStep(batch);
  s.Free(b->id);
  s.ClearPrefixCache();
  EXPECT_EQ(s.num_free_slots(), 6);
  EXPECT_EQ(s.num_free_pages(), 32);
}

}  // namespace
}  // namespace sparkserve::scheduler
