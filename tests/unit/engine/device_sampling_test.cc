// The engine's device-sampling path (ModelRunner::Run with plan.sampling): a fake runner "samples on its
// device" from nothing but the RowSampling rows the engine flattened (params, uniform, banned ids,
// bias, penalty history), using the host sampler's processing steps, and leaves every third row
// (and every row that wants logprobs) to the host. Every request must produce exactly the tokens
// the plain host-sampling engine produces.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "core/status.h"
#include "tests/unit/engine/engine_test_harness.h"

namespace sparkserve::engine::engine_test {
namespace {

class DeviceSamplingFake : public FakeModelRunner {
 public:
  using FakeModelRunner::FakeModelRunner;
  bool samples_on_device() const override { return true; }
  absl::StatusOr<model::StepOutput> Run(const model::StepPlan& plan) override {
    const std::vector<model::RowSampling>& rows = plan.sampling;
    ASSIGN_OR_RETURN(model::StepOutput out, FakeModelRunner::Run(plan));
    if (static_cast<int32_t>(rows.size()) != out.logit_row_begin.back()) {
      return absl::InternalError("one RowSampling per logit row expected");
    }
    out.sampled.resize(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      const model::RowSampling& in = rows[r];
      model::SampledRow& s = out.sampled[r];
      if (++calls_ % 3 == 0 || in.num_logprobs >= 0) {
        s.status = model::SampledRow::kNeedsHost;
        continue;
      }
      ++device_rows_;
      scheduler::SamplingParams p;
      p.temperature = in.temperature;
      p.top_k = in.top_k;
      p.top_p = in.top_p;
      p.min_p = in.min_p;
      p.repetition_penalty = in.repetition_penalty;
      p.frequency_penalty = in.frequency_penalty;
      p.presence_penalty = in.presence_penalty;
      for (const auto& [id, b] : in.bias) p.logit_bias[id] = b;
      // A prompt holding each history id once and an output holding it `count` times give the
      // penalties exactly what the sequence's own prompt and output give them.
      std::vector<int32_t> prompt, output;
      for (size_t i = 0; i < in.history_ids.size(); ++i) {
        prompt.push_back(in.history_ids[i]);
        output.insert(output.end(), static_cast<size_t>(in.history_output_counts[i]), in.history_ids[i]);
      }
      SamplingContext ctx;
      ctx.params = &p;
      ctx.prompt = prompt;
      ctx.output = output;
      ctx.banned = in.banned;
      const int64_t row = static_cast<int64_t>(r);
      std::vector<float> logits(out.logits.data<float>() + row * kVocab, out.logits.data<float>() + (row + 1) * kVocab);
      sampler_.ProcessLogits(logits, ctx);
      if (p.temperature < kGreedyTemperature) {
        s.id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<TokenProb> kept, sampler_.Truncate(logits, p));
      double cum = 0;
      s.id = kept.back().id;
      for (const TokenProb& t : kept) {
        cum += t.prob;
        if (in.uniform < cum) {
          s.id = t.id;
          break;
        }
      }
    }
    return out;
  }
  int device_rows() const { return device_rows_; }

 private:
  Sampler sampler_{kVocab};
  int calls_ = 0, device_rows_ = 0;
};

std::vector<Request> MixedRequests() {
  std::vector<Request> rs;
  for (int i = 0; i < 6; ++i) {
    Request r = Greedy(Prompt(4 + i, 500 + i), 20);
    r.sampling.seed = 1000 + i;
    r.sampling.temperature = i == 0 ? 0.0f : 0.6f + 0.2f * i;
    if (i == 2) r.sampling.top_k = 5;
    if (i == 3) r.sampling.top_p = 0.8f;
    if (i == 4) {
      r.sampling.min_p = 0.1f;
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.frequency_penalty = 0.4f;
      r.sampling.presence_penalty = 0.2f;
      r.sampling.logit_bias = {{3, 2.5f}, {7, -100.0f}};
    }
    if (i == 5) {
      r.min_tokens = 6;
      r.stop.stop_token_ids = {1, 2, 3};
      r.sampling.logprobs = 2;
    }
    rs.push_back(std::move(r));
  }
  return rs;
}

// `before_teardown` runs once every request finished, while the engine (and so `runner`) lives.
std::vector<std::vector<int32_t>> RunAll(std::unique_ptr<FakeModelRunner> runner,
                                         const std::function<void()>& before_teardown = nullptr) {
  auto e = Engine::Create(std::move(runner), {});
  EXPECT_TRUE(e.ok()) << e.status();
  std::vector<std::unique_ptr<Collector>> cs;
  for (Request& r : MixedRequests()) {
    cs.push_back(std::make_unique<Collector>());
    auto id = (*e)->Submit(std::move(r), cs.back()->Sink());
    EXPECT_TRUE(id.ok()) << id.status();
  }
  (*e)->Start();
  std::vector<std::vector<int32_t>> tokens;
  for (auto& c : cs) {
    EXPECT_TRUE(c->Wait());
    EXPECT_EQ(c->error(), "");
    tokens.push_back(c->tokens());
  }
  if (before_teardown) before_teardown();
  return tokens;
}

TEST(EngineDeviceSampling, SameTokensAsHostSamplingWithFallbackRows) {
  const auto host = RunAll(std::make_unique<FakeModelRunner>(Capacity(8, 64)));
  auto fake = std::make_unique<DeviceSamplingFake>(Capacity(8, 64));
  DeviceSamplingFake* device = fake.get();  // owned by the engine, gone once RunAll returns
  int device_rows = 0;
  const auto sampled = RunAll(std::move(fake), [&] { device_rows = device->device_rows(); });
  EXPECT_EQ(sampled, host);
  EXPECT_GT(device_rows, 50) << "the device path must carry most rows";
  // The seeded, penalised request really sampled (not greedy), so the flattening was exercised.
  EXPECT_NE(host[4], ReferenceGreedy(Prompt(8, 504), kVocab, 20));
}

}  // namespace
}  // namespace sparkserve::engine::engine_test
