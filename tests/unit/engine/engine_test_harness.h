// Test harness shared by the engine tests: a FakeModelRunner-backed Engine, a sink that collects
// TokenEvents, and small request builders.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine/generate.h"
#include "tests/unit/engine/fake_model_runner.h"

namespace sparkserve::engine::engine_test {

using scheduler::FinishReason;
using scheduler::Request;
using scheduler::RequestId;
using scheduler::TokenEvent;
using testing::FakeModelRunner;
using testing::ReferenceGreedy;

inline constexpr int32_t kVocab = 64;

inline model::ModelCapacity Capacity(int32_t slots, int32_t pages, int32_t page_size = 16, int32_t max_seq_len = 1024) {
  return {slots, pages, page_size, kVocab, max_seq_len};
}

// Collects one request's events; waits (bounded) for every sample to finish.
class Collector {
 public:
  explicit Collector(int32_t n = 1) : n_(n) {}
  TokenSink Sink() {
    return [this](const TokenEvent& e) {
      // Notify under the lock: a waiter may destroy this collector as soon as it is released.
      std::lock_guard lock(mu_);
      events_.push_back(e);
      auto& toks = tokens_[e.index];
      toks.insert(toks.end(), e.ids.begin(), e.ids.end());
      if (e.finish != FinishReason::kNone) {
        EXPECT_EQ(finish_.count(e.index), 0u) << "two final events for sample " << e.index;
        finish_[e.index] = e.finish;
        error_[e.index] = e.error;
      }
      if (on_event) on_event(e);
      cv_.notify_all();
    };
  }
  bool Wait(std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return static_cast<int32_t>(finish_.size()) == n_; });
  }
  std::vector<int32_t> tokens(int32_t index = 0) {
    std::lock_guard lock(mu_);
    return tokens_[index];
  }
  FinishReason finish(int32_t index = 0) {
    std::lock_guard lock(mu_);
    return finish_.count(index) ? finish_[index] : FinishReason::kNone;
  }
  std::string error(int32_t index = 0) {
    std::lock_guard lock(mu_);
    return error_[index];
  }
  std::vector<TokenEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::function<void(const TokenEvent&)> on_event;  // runs on the engine thread, under mu_

 private:
  int32_t n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> events_;
  std::map<int32_t, std::vector<int32_t>> tokens_;
  std::map<int32_t, FinishReason> finish_;
  std::map<int32_t, std::string> error_;
};

struct Harness {
  FakeModelRunner* model = nullptr;
  std::unique_ptr<Engine> engine;
  explicit Harness(model::ModelCapacity cap, EngineConfig config = {}) {
    auto fake = std::make_unique<FakeModelRunner>(cap);
    model = fake.get();
    auto e = Engine::Create(std::move(fake), std::move(config));
    EXPECT_TRUE(e.ok()) << e.status();
    engine = std::move(e).value();
  }
  RequestId Submit(Request r, Collector& c) {
    auto id = engine->Submit(std::move(r), c.Sink());
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }
  void ExpectIdleAndClean() {
    const EngineStats st = engine->Stats();
    EXPECT_EQ(st.num_requests_running, 0);
    EXPECT_EQ(st.num_requests_waiting, 0);
    EXPECT_EQ(st.free_slots, st.total_slots);
    EXPECT_EQ(st.free_kv_pages, st.total_kv_pages);
    const auto errors = model->contract_errors();
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
};

inline std::vector<int32_t> Prompt(int32_t len, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back(static_cast<int32_t>(testing::Mix64(salt * 1000 + i) % kVocab));
  return p;
}

inline Request Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

}  // namespace sparkserve::engine::engine_test
