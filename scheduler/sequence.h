// Sequence: one sample of one request as the scheduler sees it: its tokens (prompt, then what was
// generated), how many of them are already in its state, and the state it holds (slot, KV pages).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/step_plan.h"
#include "scheduler/request.h"

namespace sparkserve::scheduler {

using SeqId = int64_t;

enum class SeqStatus : uint8_t {
  kWaiting,    // accepted, never run yet
  kRunning,    // holds a slot and KV pages; scheduled every step it has budget for
  kPreempted,  // lost its slot and pages for room; waits to re-prefill prompt + generated tokens
  kFinished,   // done; the scheduler forgets it when freed
};

const char* SeqStatusName(SeqStatus s);

struct Sequence {
  SeqId id = 0;
  RequestId request_id = 0;
  int32_t sample_index = 0;        // which of the request's n samples
  int64_t arrival = 0;             // admission order: lower is older (preemption spares the old)
  std::vector<int32_t> tokens;     // prompt tokens, then generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t max_tokens = 0;          // most tokens this sequence may generate
  int32_t num_computed = 0;        // tokens[0, num_computed) are in its slot and KV pages
  SeqStatus status = SeqStatus::kWaiting;
  model::SlotId slot = -1;         // -1 while it holds none
  std::vector<int32_t> kv_pages;   // page table: page i holds positions [i*page_size, (i+1)*page_size)
  int32_t num_preemptions = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return num_tokens() - num_prompt_tokens; }
  // Tokens not yet in its state: the prompt (or a resumed sequence's whole history) still to
  // prefill, or the one sampled token a decode step feeds.
  int32_t num_pending() const { return num_tokens() - num_computed; }
  std::span<const int32_t> prompt() const { return {tokens.data(), static_cast<size_t>(num_prompt_tokens)}; }
  std::span<const int32_t> output() const {
    return {tokens.data() + num_prompt_tokens, static_cast<size_t>(num_generated())};
  }
};

}  // namespace sparkserve::scheduler
