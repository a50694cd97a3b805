// EngineApi: the boundary between the HTTP layer and the engine thread. Requests go in through
// Submit; token events come back through the request's sink, called on the engine thread (a sink
// must not block: it posts to the connection's executor). Tests use doubles of this interface.
#pragma once
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "scheduler/request.h"

namespace sparkserve::head {

using TokenSink = std::function<void(const scheduler::TokenEvent&)>;

struct EngineStats {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;
  int64_t steps_total = 0;              // forward steps run
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int32_t free_slots = 0;
  int32_t total_slots = 0;
  int32_t free_kv_pages = 0;
  int32_t total_kv_pages = 0;
};

class EngineApi {
 public:
  virtual ~EngineApi() = default;
  // Queues `request` (its id is assigned by the engine and returned). Fails with
  // ResourceExhausted when the waiting queue is full (the HTTP layer answers 429), or
  // InvalidArgument when the prompt plus max_tokens cannot fit the model's context.
  virtual absl::StatusOr<scheduler::RequestId> Submit(scheduler::Request request, TokenSink sink) = 0;
  // Stops a request (client gone, stop string seen); its slot is free by the next step. The sink
  // receives a final event with FinishReason::kAbort unless the request already finished.
  virtual void Cancel(scheduler::RequestId id) = 0;
  virtual EngineStats Stats() const = 0;
};

}  // namespace sparkserve::head
