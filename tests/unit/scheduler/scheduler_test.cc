// Scheduler: page and slot pools, fit checks, chunked prefill, decode-first budgets, max_batch,
// recompute preemption, and randomized workloads run against the contract-checking fake model.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <random>

#include "tests/unit/engine/fake_model_runner.h"

namespace sparkserve::scheduler {
namespace {

using model::LogitsWanted;
using model::ModelCapacity;

ModelCapacity Capacity(int32_t slots, int32_t pages, int32_t page_size, int32_t vocab = 64,
                       int32_t max_seq_len = 4096) {
  return {slots, pages, page_size, vocab, max_seq_len};
}

std::unique_ptr<Scheduler> Make(SchedulerConfig config, ModelCapacity cap) {
  auto s = Scheduler::Create(config, cap);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

std::vector<int32_t> Prompt(int32_t n, int32_t salt = 0) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back((i * 7 + salt * 13 + 1) % 64);
  return p;
}

TEST(KvPagePool, GrowsReleasesAndRefusesWithoutTakingAnything) {
  KvPagePool pool(4, 16);
  EXPECT_EQ(pool.PagesFor(0), 0);
  EXPECT_EQ(pool.PagesFor(1), 1);
  EXPECT_EQ(pool.PagesFor(16), 1);
  EXPECT_EQ(pool.PagesFor(17), 2);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.Grow(a, 33));  // 3 pages
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(pool.num_free(), 1);
  ASSERT_TRUE(pool.Grow(a, 40));  // still 3 pages: nothing taken
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(pool.Grow(b, 17));  // needs 2, 1 free
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.num_free(), 1);
  pool.Release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.num_free(), 4);
  ASSERT_TRUE(pool.Grow(b, 64));
  std::set<int32_t> distinct(b.begin(), b.end());
  EXPECT_EQ(distinct.size(), 4u);
}

TEST(SlotPool, HandsOutEachSlotOnce) {
  SlotPool pool(3);
  std::set<model::SlotId> got;
  for (int i = 0; i < 3; ++i) got.insert(*pool.Acquire());
  EXPECT_EQ(got, (std::set<model::SlotId>{0, 1, 2}));
  EXPECT_FALSE(pool.Acquire().has_value());
  pool.Release(1);
  EXPECT_EQ(*pool.Acquire(), 1);
}

TEST(Scheduler, CreateRejectsConfigsThatCannotRun) {
  EXPECT_FALSE(Scheduler::Create({}, Capacity(0, 8, 16)).ok());
  EXPECT_FALSE(Scheduler::Create({}, Capacity(4, 0, 16)).ok());
  EXPECT_FALSE(Scheduler::Create({.max_batch = 5}, Capacity(4, 8, 16)).ok());
  auto small_budget = Scheduler::Create({.max_step_tokens = 2, .max_batch = 4}, Capacity(4, 8, 16));
  ASSERT_FALSE(small_budget.ok());
  EXPECT_NE(std::string(small_budget.status().message()).find("max_step_tokens (2)"), std::string::npos);
  auto s = Scheduler::Create({}, Capacity(4, 8, 16));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->config().max_batch, 4);  // 0 = all slots
}

TEST(Scheduler, CheckFitsBoundaries) {
  const ModelCapacity cap = Capacity(4, 8, 16, 64, /*max_seq_len=*/100);  // 128 KV positions
  EXPECT_TRUE(Scheduler::CheckFits(cap, 90, 10).ok());
  absl::Status too_long = Scheduler::CheckFits(cap, 91, 10);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(too_long.message()).find("= 101 tokens exceeds the model's context of 100"),
            std::string::npos)
      << too_long;
  EXPECT_FALSE(Scheduler::CheckFits(cap, 0, 10).ok());
  EXPECT_FALSE(Scheduler::CheckFits(cap, 10, 0).ok());
  // KV: the last token is never fed, so prompt + max_tokens - 1 positions must fit 2 pages of 16.
  const ModelCapacity kv = Capacity(4, 2, 16, 64, 1000);
  EXPECT_TRUE(Scheduler::CheckFits(kv, 30, 3).ok());
  absl::Status no_room = Scheduler::CheckFits(kv, 30, 4);
  EXPECT_NE(std::string(no_room.message()).find("KV cache capacity of 32 tokens"), std::string::npos) << no_room;
}

TEST(Scheduler, ChunkedPrefillThenDecode) {
  auto s = Make({.max_step_tokens = 64, .prefill_chunk = 32}, Capacity(2, 16, 16));
  Sequence* seq = s->Add(1, 0, Prompt(100), 5);
  std::vector<int32_t> starts, sizes;
  for (int step = 0; step < 4; ++step) {
    ScheduledBatch b = s->Schedule();
    ASSERT_EQ(b.seqs.size(), 1u);
    const model::SeqWork& w = b.plan.seqs[0];
    starts.push_back(w.start_pos);
    sizes.push_back(static_cast<int32_t>(w.tokens.size()));
    EXPECT_EQ(w.logits, step == 3 ? LogitsWanted::kLast : LogitsWanted::kNone);
    EXPECT_EQ(b.seqs[0].samples, step == 3);
    EXPECT_EQ(static_cast<int32_t>(w.kv_pages.size()), (w.start_pos + w.tokens.size() + 15) / 16);
    s->CommitStep(b);
  }
  EXPECT_EQ(starts, (std::vector<int32_t>{0, 32, 64, 96}));
  EXPECT_EQ(sizes, (std::vector<int32_t>{32, 32, 32, 4}));
  s->AppendToken(seq, 7);
  ScheduledBatch d = s->Schedule();
  ASSERT_EQ(d.plan.seqs.size(), 1u);
  EXPECT_EQ(d.plan.seqs[0].start_pos, 100);
  EXPECT_EQ(d.plan.seqs[0].tokens, std::vector<int32_t>{7});
  EXPECT_EQ(d.num_decode_tokens, 1);
}

TEST(Scheduler, DecodesKeepFlowingWhileALongPromptPrefills) {
  auto s = Make({.max_step_tokens = 40, .prefill_chunk = 64}, Capacity(4, 64, 16));
  Sequence* a = s->Add(1, 0, Prompt(5), 100);
  Sequence* b = s->Add(2, 0, Prompt(6, 1), 100);
  ScheduledBatch first = s->Schedule();
  ASSERT_EQ(first.seqs.size(), 2u);
  s->CommitStep(first);
  s->AppendToken(a, 1);
  s->AppendToken(b, 2);
  Sequence* big = s->Add(3, 0, Prompt(300, 2), 10);
  int prefill_steps = 0;
  while (big->num_generated() == 0) {
    ScheduledBatch batch = s->Schedule();
    ASSERT_GE(batch.seqs.size(), 3u) << "step " << prefill_steps << " computed " << big->num_computed
                                     << " status " << SeqStatusName(big->status);
    // Decodes come first and always get their token; the prompt takes what is left of the budget.
    EXPECT_EQ(batch.seqs[0].seq, a);
    EXPECT_EQ(batch.seqs[1].seq, b);
    EXPECT_EQ(batch.seqs[0].num_tokens, 1);
    EXPECT_EQ(batch.seqs[1].num_tokens, 1);
    EXPECT_EQ(batch.seqs[2].seq, big);
    EXPECT_LE(batch.plan.num_tokens(), 40);
    s->CommitStep(batch);
    for (const auto& e : batch.seqs) {
      if (e.samples) s->AppendToken(e.seq, 3);
    }
    ++prefill_steps;
  }
  EXPECT_EQ(prefill_steps, (300 + 37) / 38);
  EXPECT_EQ(a->num_generated(), 1 + prefill_steps);
}

TEST(Scheduler, MaxBatchAndSlotsBoundRunningSequences) {
  auto s = Make({.max_step_tokens = 512, .max_batch = 3}, Capacity(4, 64, 16));
  for (int i = 0; i < 5; ++i) s->Add(static_cast<RequestId>(i), 0, Prompt(4, i), 8);
  ScheduledBatch b = s->Schedule();
  EXPECT_EQ(b.seqs.size(), 3u);
  EXPECT_EQ(s->num_running(), 3);
  EXPECT_EQ(s->num_waiting(), 2);
  EXPECT_EQ(s->num_free_slots(), 1);
  // Admission is FIFO: the three oldest run.
  EXPECT_EQ(b.seqs[0].seq->request_id, 0u);
  EXPECT_EQ(b.seqs[2].seq->request_id, 2u);
  s->CommitStep(b);
  s->AppendToken(b.seqs[0].seq, 1);
  s->AppendToken(b.seqs[2].seq, 1);
  s->Free(b.seqs[1].seq->id);
  EXPECT_EQ(s->num_free_slots(), 2);
  ScheduledBatch next = s->Schedule();
  EXPECT_EQ(next.seqs.size(), 3u);  // two decodes + request 3 admitted
  EXPECT_EQ(next.seqs[2].seq->request_id, 3u);
}

TEST(Scheduler, PreemptsTheYoungestAndResumesWithItsGeneratedTokens) {
  // 4 pages of 4 tokens; two sequences of 6 prompt tokens take 2 pages each.
  auto s = Make({.max_step_tokens = 64}, Capacity(2, 4, 4));
  Sequence* old_seq = s->Add(1, 0, Prompt(6), 8);
  Sequence* young = s->Add(2, 0, Prompt(6, 1), 8);
  ScheduledBatch b = s->Schedule();
  ASSERT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s->num_free_pages(), 0);
  s->CommitStep(b);
  s->AppendToken(old_seq, 10);
  s->AppendToken(young, 11);
  // Decodes at positions 6: both still fit in page 2 of theirs (positions 4..7).
  b = s->Schedule();
  ASSERT_EQ(b.seqs.size(), 2u);
  s->CommitStep(b);
  s->AppendToken(old_seq, 12);
  s->AppendToken(young, 13);
  b = s->Schedule();
  s->CommitStep(b);
  s->AppendToken(old_seq, 14);
  s->AppendToken(young, 15);
  // Position 8 needs a third page each: the young one is preempted for the old one.
  b = s->Schedule();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].seq, old_seq);
  EXPECT_EQ(young->status, SeqStatus::kPreempted);
  EXPECT_EQ(young->slot, -1);
  EXPECT_TRUE(young->kv_pages.empty());
  EXPECT_EQ(young->num_computed, 0);
  EXPECT_EQ(s->num_preemptions(), 1);
  EXPECT_EQ(s->num_waiting(), 1);
  s->CommitStep(b);
  s->Free(old_seq->id);
  // Resumed: re-prefills prompt + generated tokens from position 0 and samples the next token.
  b = s->Schedule();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].seq, young);
  EXPECT_EQ(b.plan.seqs[0].start_pos, 0);
  std::vector<int32_t> expect = Prompt(6, 1);
  expect.insert(expect.end(), {11, 13, 15});
  EXPECT_EQ(b.plan.seqs[0].tokens, expect);
  EXPECT_TRUE(b.seqs[0].samples);
  EXPECT_EQ(young->num_generated(), 3);
}

TEST(Scheduler, APrefillThatPreemptsItselfIsNotReadmittedInTheSameStep) {
  // 3 pages of 4 tokens. A (old) decodes; B (young) prefills 8 tokens in chunks of 4.
  auto s = Make({.max_step_tokens = 64, .prefill_chunk = 4}, Capacity(2, 3, 4));
  Sequence* a = s->Add(1, 0, Prompt(4), 6);
  Sequence* b = s->Add(2, 0, Prompt(8, 1), 2);
  ScheduledBatch first = s->Schedule();
  ASSERT_EQ(first.seqs.size(), 2u);
  s->CommitStep(first);
  s->AppendToken(a, 9);
  EXPECT_EQ(s->num_free_pages(), 1);
  // A's decode at position 4 takes the last page; B cannot grow and preempts itself. Its freed page
  // would let it restart from 0 at once, only to be preempted again: it must wait instead.
  ScheduledBatch next = s->Schedule();
  ASSERT_EQ(next.seqs.size(), 1u);
  EXPECT_EQ(next.seqs[0].seq, a);
  EXPECT_EQ(b->status, SeqStatus::kPreempted);
  EXPECT_EQ(s->num_free_pages(), 1);
  s->CommitStep(next);
  s->AppendToken(a, 9);
  // Still no room for B's whole prompt (2 pages) while A holds 2 of 3: it keeps waiting.
  ScheduledBatch third = s->Schedule();
  ASSERT_EQ(third.seqs.size(), 1u);
  EXPECT_EQ(b->status, SeqStatus::kPreempted);
  s->CommitStep(third);
  s->Free(a->id);
  ScheduledBatch resumed = s->Schedule();
  ASSERT_EQ(resumed.seqs.size(), 1u);
  EXPECT_EQ(resumed.seqs[0].seq, b);
  EXPECT_EQ(resumed.plan.seqs[0].start_pos, 0);
}

TEST(Scheduler, FreeReturnsSlotAndPagesAtOnce) {
  auto s = Make({}, Capacity(2, 8, 4));
  Sequence* a = s->Add(1, 0, Prompt(10), 4);
  s->Add(2, 0, Prompt(3), 4);
  ScheduledBatch b = s->Schedule();
  EXPECT_EQ(s->num_free_pages(), 8 - 3 - 1);
  s->Free(a->id);
  EXPECT_EQ(s->num_free_pages(), 7);
  EXPECT_EQ(s->num_free_slots(), 1);
  EXPECT_EQ(s->num_running(), 1);
  // A waiting sequence can be freed too.
  Sequence* w = s->Add(3, 0, Prompt(3), 4);
  EXPECT_EQ(s->num_waiting(), 1);
  s->Free(w->id);
  EXPECT_EQ(s->num_waiting(), 0);
  EXPECT_EQ(s->Find(w->id), nullptr);
}

// Drives the scheduler like the engine (greedy over the fake's logits) until every sequence ends.
struct Simulation {
  std::unique_ptr<Scheduler> sched;
  testing::FakeModelRunner model;
  std::map<SeqId, std::vector<int32_t>> prompts;
  std::map<SeqId, int32_t> max_tokens;
  std::map<SeqId, std::vector<int32_t>> outputs;
  int64_t steps = 0;

  Simulation(SchedulerConfig config, ModelCapacity cap) : sched(Make(config, cap)), model(cap) {}

  void Add(std::vector<int32_t> prompt, int32_t max_new) {
    Sequence* seq = sched->Add(static_cast<RequestId>(prompts.size()), 0, prompt, max_new);
    prompts[seq->id] = std::move(prompt);
    max_tokens[seq->id] = max_new;
  }

  void Run() {
    while (outputs.size() < prompts.size()) {
      ScheduledBatch b = sched->Schedule();
      ASSERT_FALSE(b.empty()) << "no progress with " << sched->num_waiting() << " waiting";
      EXPECT_LE(b.plan.num_tokens(), sched->config().max_step_tokens);
      EXPECT_LE(static_cast<int32_t>(b.seqs.size()), sched->config().max_batch);
      auto out = model.Run(b.plan);
      ASSERT_TRUE(out.ok()) << out.status();
      ++steps;
      sched->CommitStep(b);
      const int32_t vocab = sched->capacity().vocab_size;
      for (size_t i = 0; i < b.seqs.size(); ++i) {
        if (!b.seqs[i].samples) continue;
        const float* row = out->logits.data<float>() + (out->logit_row_begin[i + 1] - 1) * vocab;
        int32_t best = 0;
        for (int32_t v = 1; v < vocab; ++v) {
          if (row[v] > row[best]) best = v;
        }
        Sequence* seq = b.seqs[i].seq;
        sched->AppendToken(seq, best);
        if (seq->num_generated() == seq->max_tokens) {
          outputs[seq->id] = std::vector<int32_t>(seq->output().begin(), seq->output().end());
          sched->Free(seq->id);
        }
      }
    }
  }
};

TEST(Scheduler, RandomWorkloadsUnderATinyKvPoolMatchSequentialGreedy) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    const int32_t page = 4 + static_cast<int32_t>(rng() % 5);
    const int32_t pages = 12 + static_cast<int32_t>(rng() % 10);
    Simulation sim({.max_step_tokens = 24 + static_cast<int32_t>(rng() % 40),
                    .prefill_chunk = static_cast<int32_t>(rng() % 3) * 8,
                    .max_batch = 0},
                   Capacity(6, pages, page, 64, 4096));
    int64_t total_tokens = 0;
    for (int i = 0; i < 14; ++i) {
      const int32_t len = 1 + static_cast<int32_t>(rng() % 30);
      const int32_t max_new = 1 + static_cast<int32_t>(rng() % 20);
      if ((len + max_new - 1 + page - 1) / page > pages) continue;
      std::vector<int32_t> p;
      for (int j = 0; j < len; ++j) p.push_back(static_cast<int32_t>(rng() % 64));
      total_tokens += max_new;
      sim.Add(std::move(p), max_new);
    }
    ASSERT_NO_FATAL_FAILURE(sim.Run());
    for (const auto& [id, prompt] : sim.prompts) {
      EXPECT_EQ(sim.outputs[id], testing::ReferenceGreedy(prompt, 64, sim.max_tokens[id])) << "seed " << seed;
    }
    EXPECT_TRUE(sim.model.contract_errors().empty()) << sim.model.contract_errors()[0];
    EXPECT_GT(sim.sched->num_preemptions(), 0) << "seed " << seed << ": the pool should be too small";
    EXPECT_LT(sim.steps, total_tokens) << "steps should be shared";
    EXPECT_EQ(sim.sched->num_free_pages(), sim.sched->num_pages());
    EXPECT_EQ(sim.sched->num_free_slots(), sim.sched->num_slots());
  }
}

}  // namespace
}  // namespace sparkserve::scheduler
