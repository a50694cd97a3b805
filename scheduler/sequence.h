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
  // Speculative decoding (MTP): the rows of its most recent forward that the MTP block has not been
  // teacher-forced over yet: positions [mtp_pos, mtp_pos + mtp_count) are rows [mtp_row, ...) of
  // the forward of step mtp_step (the runner keeps only the last forward's rows).
  int32_t mtp_pos = 0;
  int32_t mtp_count = 0;
  int32_t mtp_row = 0;
  int64_t mtp_step = -1;
  bool mtp_off = false;        // the engine stopped MTP for it (drafting does not pay): no MTP work
  int32_t commit_columns = 0;  // its last verify accepted this many columns: next step commits them
  // Prefix cache: prompt positions where its state is checkpointed (ascending, in (0, prompt)),
  // and the prompt tokens its first admission resumed from the cache.
  std::vector<int32_t> cache_points;
  int32_t num_cached = 0;

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
