// EngineApi: the boundary between the HTTP layer and the engine thread. Requests go in through
// Submit; token events come back through the request's sink, called on the engine thread (a sink
// must not block: it posts to the connection's executor). Tests use doubles of this interface.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/histogram.h"
#include "scheduler/request.h"

namespace sparkserve::engine {

using TokenSink = std::function<void(const scheduler::TokenEvent&)>;

struct EngineStats {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;
  int64_t steps_total = 0;              // forward steps run
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int32_t free_slots = 0;   // sequence slots (the prefix cache's checkpoint slots are not counted)
  int32_t total_slots = 0;
  int32_t free_kv_pages = 0;
  int32_t total_kv_pages = 0;
  int32_t max_seq_len = 0;              // the model's context (prompt + max_tokens must fit)
  int64_t num_preemptions_total = 0;    // sequences preempted for room (they resume, output kept)
  // Prefix cache: prompt tokens looked up and found (vLLM's prefix_cache_queries/hits), and the
  // device tier's occupancy (checkpoint state slots in use of the spare ones, KV pages held).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int32_t prefix_cache_entries = 0;
  int32_t prefix_cache_max_entries = 0;
  int32_t prefix_cache_pages = 0;
  int32_t prefix_cache_only_pages = 0;  // of those, held by no running request
  // Speculative decoding, counted as vLLM's spec_decode_* counters: verify windows, drafted
  // tokens, accepted drafts, accepted drafts per position (0-based; size: the most drafts).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  // Structured outputs: seconds spent computing token masks (on the mask thread, overlapping the
  // forward), and seconds steps waited for them beyond the forward.
  double constraint_mask_seconds_total = 0.0;
  double constraint_wait_seconds_total = 0.0;
  // request_success_total{finished_reason=...}: requests by the finish reason of their last sample.
  int64_t requests_finished_stop = 0;
  int64_t requests_finished_length = 0;
  int64_t requests_finished_abort = 0;
  int64_t requests_finished_error = 0;
  // Latency histograms (seconds) with vLLM's bucket bounds.
  Histogram time_to_first_token_s;      // Submit -> first token of the request
  Histogram time_per_output_token_s;    // gap between consecutive tokens of one sample
  Histogram e2e_request_latency_s;      // Submit -> last sample finished (not for errors)
  Histogram iteration_tokens;           // tokens fed per forward step (prefill + decode)
};

class EngineApi {
 public:
  virtual ~EngineApi() = default;
  // Queues `request` (its id is assigned by the engine and returned). Fails with
  // ResourceExhausted when the waiting queue is full (the HTTP layer answers 429), or
  // InvalidArgument when the prompt plus max_tokens cannot fit the model's context (or a field is
  // out of range), or Unavailable while the engine drains (the HTTP layer answers 503).
  virtual absl::StatusOr<scheduler::RequestId> Submit(scheduler::Request request, TokenSink sink) = 0;
  // Stops a request (client gone, stop string seen); its slot is free by the next step. The sink
  // receives a final event with FinishReason::kAbort unless the request already finished.
  virtual void Cancel(scheduler::RequestId id) = 0;
  // Ends a request early with `reason` on its samples' final events: the HTTP side calls
  // Finish(id, FinishReason::kStop) when it matched a stop string, so the request ends as
  // stopped rather than aborted. Same timing as Cancel. Doubles may keep this default.
  virtual void Finish(scheduler::RequestId id, scheduler::FinishReason reason) { Cancel(id); }
  virtual EngineStats Stats() const = 0;
};

}  // namespace sparkserve::engine
