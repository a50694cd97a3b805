// Generate: a blocking wrapper over EngineApi's Submit and token sink.
#include "engine/generate.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include "fmt/format.h"

namespace sparkserve::engine {

absl::StatusOr<std::vector<GeneratedSample>> Generate(EngineApi& engine, scheduler::Request request,
                                                      std::chrono::milliseconds timeout) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<GeneratedSample> samples;
    int32_t unfinished = 0;
    std::string error;
  };
  // Shared ownership: the sink may still run on the engine thread after a timeout returns.
  auto shared = std::make_shared<Shared>();
  const int32_t n = request.n < 1 ? 1 : request.n;
  shared->samples.resize(static_cast<size_t>(n));
  shared->unfinished = n;
  auto id = engine.Submit(std::move(request), [shared](const scheduler::TokenEvent& e) {
    std::lock_guard lock(shared->mu);
    if (e.index < 0 || e.index >= static_cast<int32_t>(shared->samples.size())) return;
    GeneratedSample& s = shared->samples[static_cast<size_t>(e.index)];
    s.ids.insert(s.ids.end(), e.ids.begin(), e.ids.end());
    s.logprobs.insert(s.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    s.top_logprobs.insert(s.top_logprobs.end(), e.top_logprobs.begin(), e.top_logprobs.end());
    if (e.finish != scheduler::FinishReason::kNone && s.finish == scheduler::FinishReason::kNone) {
      s.finish = e.finish;
      if (e.finish == scheduler::FinishReason::kError && shared->error.empty()) shared->error = e.error;
      --shared->unfinished;
    }
    shared->cv.notify_all();
  });
  if (!id.ok()) return id.status();
  std::unique_lock lock(shared->mu);
  if (!shared->cv.wait_for(lock, timeout, [&] { return shared->unfinished == 0; })) {
    lock.unlock();
    engine.Cancel(*id);
    return absl::DeadlineExceededError(fmt::format("generation did not finish within {} ms", timeout.count()));
  }
  if (!shared->error.empty()) return absl::InternalError(shared->error);
  return shared->samples;
}

}  // namespace sparkserve::engine
