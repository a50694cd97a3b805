// Generate: one request through any EngineApi, waited for (for `sparkserve run`, benches and
// tests that do not stream). Collects each sample's tokens, logprobs and finish reason.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_api.h"
#include "scheduler/request.h"

namespace sparkserve::engine {

struct GeneratedSample {
  std::vector<int32_t> ids;
  std::vector<scheduler::TokenLogprob> logprobs;                  // per id, when requested
  std::vector<std::vector<scheduler::TokenLogprob>> top_logprobs;  // per id, when requested
  scheduler::FinishReason finish = scheduler::FinishReason::kNone;
};

// Submits `request` and blocks until every sample has finished. Fails with Submit's error, with
// DeadlineExceeded (after cancelling the request) past `timeout`, or with Internal carrying the
// engine's message when a sample ended in kError.
absl::StatusOr<std::vector<GeneratedSample>> Generate(
    EngineApi& engine, scheduler::Request request,
    std::chrono::milliseconds timeout = std::chrono::hours(24));

}  // namespace sparkserve::engine
