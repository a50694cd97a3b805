// Engine: continuous batching against sequential references, chunked prefill next to decodes,
// preemption, cancellation, stop rules, queue bounds, n > 1, seeds, model errors, drain, metrics.
// The model is FakeModelRunner (logits = f(token history)), which also checks the plan contract.
#include "tests/unit/engine/engine_test_harness.h"

namespace sparkserve::engine {
namespace {

using namespace engine_test;  // NOLINT: the harness is this test's vocabulary

TEST(Engine, SixteenConcurrentGreedyRequestsMatchSequentialAndShareSteps) {
  EngineConfig config;
  config.eos_token_ids = {5};
  Harness h(Capacity(16, 256), config);
  std::vector<std::unique_ptr<Collector>> out;
  std::vector<std::vector<int32_t>> prompts;
  int64_t prompt_tokens = 0;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(Prompt(5 + 3 * i, i));
    prompt_tokens += static_cast<int64_t>(prompts.back().size());
    out.push_back(std::make_unique<Collector>());
    h.Submit(Greedy(prompts.back(), 24), *out.back());
  }
  h.engine->Start();
  int64_t generated = 0;
  int stopped = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(out[static_cast<size_t>(i)]->Wait()) << "request " << i << " did not finish";
    const std::vector<int32_t> want = ReferenceGreedy(prompts[static_cast<size_t>(i)], kVocab, 24, {5});
    EXPECT_EQ(out[static_cast<size_t>(i)]->tokens(), want) << "request " << i;
    const bool eos = want.back() == 5;
    stopped += eos;
    EXPECT_EQ(out[static_cast<size_t>(i)]->finish(), eos ? FinishReason::kStop : FinishReason::kLength);
    generated += static_cast<int64_t>(want.size());
  }
  const EngineStats st = h.engine->Stats();
  EXPECT_EQ(st.generation_tokens_total, generated);
  EXPECT_EQ(st.prompt_tokens_total, prompt_tokens);
  EXPECT_LT(st.steps_total * 4, generated) << "requests should share forward steps";
  EXPECT_EQ(st.steps_total, h.model->num_forwards());
  EXPECT_EQ(st.requests_finished_stop, stopped);
  EXPECT_EQ(st.requests_finished_length, 16 - stopped);
  EXPECT_EQ(st.time_to_first_token_s.count, 16);
  EXPECT_EQ(st.e2e_request_latency_s.count, 16);
  EXPECT_EQ(st.time_per_output_token_s.count, generated - 16);
  EXPECT_EQ(st.iteration_tokens.count, st.steps_total);
  EXPECT_EQ(st.iteration_tokens.sum, static_cast<double>(prompt_tokens + generated - 16));
  h.ExpectIdleAndClean();
}

TEST(Engine, ALongPromptPrefillsInChunksWhileDecodesGetATokenEveryStep) {
  EngineConfig config;
  config.scheduler = {.max_step_tokens = 32, .prefill_chunk = 16, .max_batch = 4};
  Harness h(Capacity(4, 64), config);
  Collector a, b;
  std::atomic<bool> submitted_b{false};
  // on_event runs under the collector's lock: only Submit (engine mutex) is called from it.
  a.on_event = [&](const TokenEvent&) {
    if (!submitted_b.exchange(true)) {
      EXPECT_TRUE(h.engine->Submit(Greedy(Prompt(200, 2), 4), b.Sink()).ok());
    }
  };
  h.Submit(Greedy(Prompt(6, 1), 40), a);
  h.engine->Start();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(a.tokens(), ReferenceGreedy(Prompt(6, 1), kVocab, 40));
  EXPECT_EQ(b.tokens(), ReferenceGreedy(Prompt(200, 2), kVocab, 4));
  int prefill_steps = 0;
  for (const model::StepPlan& plan : h.model->plans()) {
    bool has_chunk = false, has_decode = false;
    for (const model::SeqWork& w : plan.seqs) {
      has_chunk |= w.tokens.size() > 1;
      has_decode |= w.tokens.size() == 1 && w.start_pos >= 6;
      EXPECT_LE(w.tokens.size(), 16u);
    }
    EXPECT_LE(plan.num_tokens(), 32);
    if (has_chunk && plan.seqs.size() > 1) {
      ++prefill_steps;
      EXPECT_TRUE(has_decode) << "a prefill step without the running decode";
    }
  }
  EXPECT_EQ(prefill_steps, (200 + 15) / 16);
  h.ExpectIdleAndClean();
}

TEST(Engine, PreemptionUnderATinyKvPoolCompletesEveryRequestWithIdenticalOutput) {
  EngineConfig config;
  config.scheduler = {.max_step_tokens = 64, .prefill_chunk = 8, .max_batch = 8};
  Harness h(Capacity(8, 12, 4), config);  // 48 KV positions for 8 sequences of up to 31
  std::vector<std::unique_ptr<Collector>> out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(std::make_unique<Collector>());
    h.Submit(Greedy(Prompt(8 + i % 5, 10 + i), 20), *out.back());
  }
  h.engine->Start();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(out[static_cast<size_t>(i)]->Wait());
    EXPECT_EQ(out[static_cast<size_t>(i)]->tokens(), ReferenceGreedy(Prompt(8 + i % 5, 10 + i), kVocab, 20)) << i;
    EXPECT_EQ(out[static_cast<size_t>(i)]->finish(), FinishReason::kLength);
  }
  EXPECT_GT(h.engine->Stats().num_preemptions_total, 0);
  h.ExpectIdleAndClean();
}

TEST(Engine, CancelMidStreamFreesSlotAndPagesBeforeTheNextStep) {
  Harness h(Capacity(2, 32));
  Collector c;
  std::atomic<RequestId> id{0};
  int64_t forwards_at_cancel = -1, forwards_at_abort = -1;
  EngineStats at_abort;
  c.on_event = [&](const TokenEvent& e) {
    if (e.finish == FinishReason::kAbort) {
      forwards_at_abort = h.model->num_forwards();
      at_abort = h.engine->Stats();
    } else if (!e.ids.empty() && forwards_at_cancel < 0 && h.model->num_forwards() >= 3) {
      forwards_at_cancel = h.model->num_forwards();
      h.engine->Cancel(id.load());
    }
  };
  id = h.Submit(Greedy(Prompt(10, 3), 500), c);
  h.engine->Start();
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(c.finish(), FinishReason::kAbort);
  EXPECT_EQ(c.tokens().size(), 3u);
  EXPECT_EQ(forwards_at_abort, forwards_at_cancel) << "a forward ran between the cancel and its abort event";
  EXPECT_EQ(at_abort.free_slots, at_abort.total_slots);
  EXPECT_EQ(at_abort.free_kv_pages, at_abort.total_kv_pages);
  EXPECT_EQ(at_abort.num_requests_running, 0);
  EXPECT_EQ(at_abort.requests_finished_abort, 1);
  // Cancelling again (or an unknown id) does nothing.
  h.engine->Cancel(id.load());
  h.engine->Cancel(12345);
  Collector next;
  h.Submit(Greedy(Prompt(4, 4), 3), next);
  ASSERT_TRUE(next.Wait());
  EXPECT_EQ(next.finish(), FinishReason::kLength);
  h.ExpectIdleAndClean();
}

TEST(Engine, FinishWithStopEndsTheRequestAsStopped) {
  Harness h(Capacity(2, 32));
  Collector c;
  std::atomic<RequestId> id{0};
  c.on_event = [&](const TokenEvent& e) {
    if (e.ids.size() == 1 && e.finish == FinishReason::kNone) h.engine->Finish(id.load(), FinishReason::kStop);
  };
  id = h.Submit(Greedy(Prompt(5, 5), 100), c);
  h.engine->Start();
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(c.finish(), FinishReason::kStop);
  EXPECT_EQ(c.error(), "");
  EXPECT_EQ(h.engine->Stats().requests_finished_stop, 1);
  h.ExpectIdleAndClean();
}

TEST(Engine, FullQueueAnswersResourceExhaustedThenRecovers) {
  EngineConfig config;
  config.max_waiting_requests = 4;
  Harness h(Capacity(2, 32), config);
  std::vector<std::unique_ptr<Collector>> out;
  for (int i = 0; i < 4; ++i) {
    out.push_back(std::make_unique<Collector>());
    h.Submit(Greedy(Prompt(4, i), 3), *out.back());
  }
  Collector rejected;
  auto full = h.engine->Submit(Greedy(Prompt(4, 9), 3), rejected.Sink());
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(full.status().message()).find("queue is full"), std::string::npos);
  h.engine->Start();
  for (auto& c : out) ASSERT_TRUE(c->Wait());
  Collector later;
  h.Submit(Greedy(Prompt(4, 9), 3), later);
  ASSERT_TRUE(later.Wait());
  EXPECT_TRUE(rejected.events().empty());
  h.ExpectIdleAndClean();
}

TEST(Engine, SubmitAllStartsTheRequestsInOneStepOrRefusesThemAll) {
  Harness h(Capacity(4, 64));
  h.engine->Start();  // running already: one Submit at a time could be a step apart
  std::vector<std::unique_ptr<Collector>> out;
  std::vector<std::pair<Request, TokenSink>> batch;
  for (int i = 0; i < 3; ++i) {
    out.push_back(std::make_unique<Collector>());
    batch.emplace_back(Greedy(Prompt(5, 20 + i), 6), out.back()->Sink());
  }
  std::vector<std::pair<Request, TokenSink>> bad;
  Collector unused;
  bad.emplace_back(Greedy(Prompt(5, 30), 6), unused.Sink());
  bad.emplace_back(Greedy(Prompt(5, 31), 0), unused.Sink());  // max_tokens 0: invalid
  auto refused = h.engine->SubmitAll(std::move(bad));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto ids = h.engine->SubmitAll(std::move(batch));
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(out[static_cast<size_t>(i)]->Wait());
    EXPECT_EQ(out[static_cast<size_t>(i)]->tokens(), ReferenceGreedy(Prompt(5, 20 + i), kVocab, 6)) << i;
  }
  ASSERT_FALSE(h.model->plans().empty());
  EXPECT_EQ(h.model->plans().front().seqs.size(), 3u) << "the three requests should start in the same step";
  EXPECT_EQ(h.model->num_forwards(), 6) << "one prefill step and five shared decode steps";
  EXPECT_TRUE(unused.events().empty()) << "nothing of a refused batch may run";
  h.ExpectIdleAndClean();
}

TEST(Engine, NSamplesEachGetTheirOwnSequence) {
  Harness h(Capacity(4, 64));
  Collector greedy(3);
  Request r = Greedy(Prompt(7, 6), 10);
  r.n = 3;
  h.Submit(r, greedy);
  h.engine->Start();
  ASSERT_TRUE(greedy.Wait());
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(greedy.tokens(i), ReferenceGreedy(Prompt(7, 6), kVocab, 10)) << i;
    EXPECT_EQ(greedy.finish(i), FinishReason::kLength);
  }
  // Sampled: the samples differ from each other and reproduce with the same seed.
  auto sampled = [&](uint64_t seed) {
    Collector c(4);
    Request s = Greedy(Prompt(7, 6), 12);
    s.n = 4;
    s.sampling.temperature = 1.0f;
    s.sampling.seed = seed;
    h.Submit(s, c);
    EXPECT_TRUE(c.Wait());
    std::vector<std::vector<int32_t>> all;
    for (int32_t i = 0; i < 4; ++i) all.push_back(c.tokens(i));
    return all;
  };
  const auto first = sampled(7);
  EXPECT_EQ(first, sampled(7));
  EXPECT_NE(first[0], first[1]);
  EXPECT_NE(first, sampled(8));
  h.ExpectIdleAndClean();
}

TEST(Engine, SeededSamplingIsIndependentOfBatchCompositionAndPreemption) {
  Request r = Greedy(Prompt(9, 77), 30);
  r.sampling.temperature = 0.8f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 99;
  std::vector<int32_t> alone;
  {
    Harness h(Capacity(4, 64));
    Collector c;
    h.Submit(r, c);
    h.engine->Start();
    ASSERT_TRUE(c.Wait());
    alone = c.tokens();
    ASSERT_EQ(alone.size(), 30u);
  }
  EngineConfig config;
  config.scheduler = {.max_step_tokens = 32, .prefill_chunk = 4, .max_batch = 6};
  Harness h(Capacity(6, 14, 4), config);
  std::vector<std::unique_ptr<Collector>> others;
  for (int i = 0; i < 8; ++i) {
    others.push_back(std::make_unique<Collector>());
    Request o = Greedy(Prompt(5 + i, 200 + i), 25);
    o.sampling.temperature = 1.0f;  // unseeded
    h.Submit(o, *others.back());
    if (i == 4) {
      Collector c;
      h.Submit(r, c);
      h.engine->Start();
      ASSERT_TRUE(c.Wait());
      EXPECT_EQ(c.tokens(), alone);
    }
  }
  for (auto& c : others) ASSERT_TRUE(c->Wait());
  EXPECT_GT(h.engine->Stats().num_preemptions_total, 0);
  h.ExpectIdleAndClean();
}

TEST(Engine, StopTokensMinTokensAndIgnoreEos) {
  const std::vector<int32_t> prompt = Prompt(6, 31);
  const std::vector<int32_t> free_run = ReferenceGreedy(prompt, kVocab, 8);
  const int32_t eos = free_run[0];  // the model's very first choice
  EngineConfig config;
  config.eos_token_ids = {eos};
  Harness h(Capacity(4, 64), config);
  h.engine->Start();
  {
    Collector c;
    h.Submit(Greedy(prompt, 8), c);
    ASSERT_TRUE(c.Wait());
    EXPECT_EQ(c.tokens(), std::vector<int32_t>{eos});  // the stop token is reported, then it ends
    EXPECT_EQ(c.finish(), FinishReason::kStop);
  }
  {
    Collector c;
    Request r = Greedy(prompt, 8);
    r.stop.ignore_eos = true;
    h.Submit(r, c);
    ASSERT_TRUE(c.Wait());
    EXPECT_EQ(c.tokens(), free_run);
    EXPECT_EQ(c.finish(), FinishReason::kLength);
  }
  {
    Collector c;
    Request r = Greedy(prompt, 8);
    r.min_tokens = 3;
    h.Submit(r, c);
    ASSERT_TRUE(c.Wait());
    const std::vector<int32_t> got = c.tokens();
    ASSERT_GE(got.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_NE(got[i], eos) << "eos sampled below min_tokens";
    // The first token is the best one other than eos.
    const std::vector<float> row = testing::FakeLogits(prompt, kVocab);
    int32_t second = eos == 0 ? 1 : 0;
    for (int32_t v = 0; v < kVocab; ++v) {
      if (v != eos && row[static_cast<size_t>(v)] > row[static_cast<size_t>(second)]) second = v;
    }
    EXPECT_EQ(got[0], second);
  }
  {
    Collector c;
    Request r = Greedy(prompt, 8);
    r.stop.ignore_eos = true;
    r.stop.stop_token_ids = {free_run[3]};
    h.Submit(r, c);
    ASSERT_TRUE(c.Wait());
    const auto at = std::find(free_run.begin(), free_run.end(), free_run[3]);
    EXPECT_EQ(c.tokens(), std::vector<int32_t>(free_run.begin(), at + 1));
    EXPECT_EQ(c.finish(), FinishReason::kStop);
  }
  h.ExpectIdleAndClean();
}

TEST(Engine, LogprobsComeWithEveryToken) {
  Harness h(Capacity(2, 32));
  Collector c;
  Request r = Greedy(Prompt(5, 40), 4);
  r.sampling.logprobs = 3;
  h.Submit(r, c);
  h.engine->Start();
  ASSERT_TRUE(c.Wait());
  std::vector<int32_t> history = Prompt(5, 40);
  for (const TokenEvent& e : c.events()) {
    ASSERT_EQ(e.ids.size(), 1u);
    ASSERT_EQ(e.logprobs.size(), 1u);
    ASSERT_EQ(e.top_logprobs.size(), 1u);
    ASSERT_EQ(e.top_logprobs[0].size(), 3u);
    const std::vector<float> row = testing::FakeLogits(history, kVocab);
    double z = 0;
    for (float v : row) z += std::exp(static_cast<double>(v));
    EXPECT_NEAR(e.logprobs[0].logprob, row[static_cast<size_t>(e.ids[0])] - std::log(z), 1e-4);
    EXPECT_EQ(e.top_logprobs[0][0].id, e.ids[0]);  // greedy: the best raw token
    EXPECT_GE(e.top_logprobs[0][0].logprob, e.top_logprobs[0][1].logprob);
    history.push_back(e.ids[0]);
  }
}

TEST(Engine, AForwardErrorFailsTheInFlightRequestsAndTheEngineKeepsServing) {
  Harness h(Capacity(4, 64));
  Collector a, b;
  a.on_event = [&](const TokenEvent& e) {
    if (e.finish == FinishReason::kNone) h.model->FailNextForward();
  };
  h.Submit(Greedy(Prompt(5, 50), 50), a);
  h.Submit(Greedy(Prompt(6, 51), 50), b);
  h.engine->Start();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(a.finish(), FinishReason::kError);
  EXPECT_NE(a.error().find("injected device fault"), std::string::npos) << a.error();
  EXPECT_EQ(b.finish(), FinishReason::kError);
  EXPECT_EQ(h.engine->Stats().requests_finished_error, 2);
  Collector later;
  h.Submit(Greedy(Prompt(5, 52), 5), later);
  ASSERT_TRUE(later.Wait());
  EXPECT_EQ(later.tokens(), ReferenceGreedy(Prompt(5, 52), kVocab, 5));
  h.ExpectIdleAndClean();
}

TEST(Engine, NonFiniteLogitsFailTheRequestsThatSampleThemWithAClearError) {
  Harness h(Capacity(8, 64));
  std::vector<std::unique_ptr<Collector>> out;
  out.push_back(std::make_unique<Collector>());
  out.front()->on_event = [&](const TokenEvent& e) {
    if (e.finish == FinishReason::kNone && e.ids.size() == 1) h.model->PoisonNextLogits();
  };
  for (int i = 0; i < 6; ++i) {
    if (i > 0) out.push_back(std::make_unique<Collector>());
    h.Submit(Greedy(Prompt(3, 90 + i), 40), *out.back());
  }
  h.engine->Start();
  for (auto& c : out) {
    ASSERT_TRUE(c->Wait());
    EXPECT_EQ(c->finish(), FinishReason::kError);
    EXPECT_NE(c->error().find("sampling failed: the model produced NaN logits"), std::string::npos) << c->error();
  }
  Collector later;
  h.Submit(Greedy(Prompt(5, 99), 3), later);
  ASSERT_TRUE(later.Wait());
  EXPECT_EQ(later.finish(), FinishReason::kLength);
  h.ExpectIdleAndClean();
}

TEST(Engine, SubmitRejectsRequestsThatCanNeverRunWithClearErrors) {
  Harness h(Capacity(2, 8, 16, /*max_seq_len=*/100));  // 128 KV positions
  Collector c;
  auto code_and_text = [&](Request r, const std::string& text) {
    auto s = h.engine->Submit(std::move(r), c.Sink());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(std::string(s.status().message()).find(text), std::string::npos) << s.status();
  };
  code_and_text(Greedy(Prompt(90, 1), 11), "exceeds the model's context of 100 tokens");
  code_and_text(Greedy({}, 4), "the prompt has no tokens");
  code_and_text(Greedy({1, 64}, 4), "prompt token id 64 at position 1 is outside the vocabulary");
  code_and_text(Greedy({1}, 0), "max_tokens must be at least 1");
  Request r = Greedy({1}, 4);
  r.n = 0;
  code_and_text(r, "n must be between 1 and 128");
  r = Greedy({1}, 4);
  r.min_tokens = 5;
  code_and_text(r, "min_tokens (5) must be between 0 and max_tokens (4)");
  r = Greedy({1}, 4);
  r.sampling.top_p = 0.0f;
  code_and_text(r, "top_p must be in (0, 1]");
  r = Greedy({1}, 4);
  r.sampling.temperature = -1.0f;
  code_and_text(r, "temperature must be >= 0");
  r = Greedy({1}, 4);
  r.sampling.logprobs = 21;
  code_and_text(r, "logprobs must be between 0 and 20");
  r = Greedy({1}, 4);
  r.sampling.logit_bias = {{70, 1.0f}};
  code_and_text(r, "logit_bias token id 70");
  r = Greedy({1}, 4);
  r.sampling.repetition_penalty = 0.0f;
  code_and_text(r, "repetition_penalty must be > 0");
  r = Greedy({1}, 4);
  r.sampling.presence_penalty = 2.5f;
  code_and_text(r, "presence_penalty must be in [-2, 2]");
  EXPECT_EQ(h.engine->Submit(Greedy({1}, 4), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  // top_k = -1 means off, like 0.
  Collector ok;
  Request k = Greedy({1, 2}, 2);
  k.sampling.top_k = -1;
  h.Submit(k, ok);
  h.engine->Start();
  ASSERT_TRUE(ok.Wait());
  EXPECT_TRUE(c.events().empty());
}

TEST(Engine, CreateRejectsBadConfigs) {
  EngineConfig bad_eos;
  bad_eos.eos_token_ids = {kVocab};
  EXPECT_FALSE(Engine::Create(std::make_unique<FakeModelRunner>(Capacity(2, 8)), bad_eos).ok());
  EXPECT_FALSE(Engine::Create(std::make_unique<FakeModelRunner>(Capacity(0, 8)), {}).ok());
  EXPECT_FALSE(Engine::Create(nullptr, {}).ok());
}

TEST(Engine, DrainFinishesAcceptedRequestsThenRefusesNewOnes) {
  Harness h(Capacity(2, 64));
  std::vector<std::unique_ptr<Collector>> out;
  for (int i = 0; i < 5; ++i) {
    out.push_back(std::make_unique<Collector>());
    h.Submit(Greedy(Prompt(4, 60 + i), 6), *out.back());
  }
  h.engine->Drain();  // starts the thread, finishes all five, returns when it exits
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out[static_cast<size_t>(i)]->finish(), FinishReason::kLength) << i;
    EXPECT_EQ(out[static_cast<size_t>(i)]->tokens(), ReferenceGreedy(Prompt(4, 60 + i), kVocab, 6));
  }
  Collector late;
  EXPECT_EQ(h.engine->Submit(Greedy({1}, 2), late.Sink()).status().code(), absl::StatusCode::kUnavailable);
  h.ExpectIdleAndClean();
}

TEST(Engine, ShutdownAbortsWhatIsInFlight) {
  Harness h(Capacity(2, 6000, 16, /*max_seq_len=*/96000));  // a request that runs for minutes
  Collector running, queued;
  std::atomic<bool> first{false};
  running.on_event = [&](const TokenEvent&) { first = true; };
  h.Submit(Greedy(Prompt(4, 70), 90000), running);
  h.engine->Start();
  while (!first) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  h.engine->Shutdown();
  ASSERT_TRUE(running.Wait(std::chrono::milliseconds(0)));
  EXPECT_EQ(running.finish(), FinishReason::kAbort);
  EXPECT_EQ(h.engine->Submit(Greedy({1}, 2), queued.Sink()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace sparkserve::engine
