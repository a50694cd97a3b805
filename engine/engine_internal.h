// Engine's private state shared by engine.cc (the loop, requests, metrics) and engine_step.cc
// (a step's postprocessing); not part of the engine's interface.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace sparkserve::engine {

struct Engine::RequestState {
  scheduler::RequestId id = 0;
  scheduler::Request request;
  std::shared_ptr<TokenSink> sink;
  Clock::time_point arrival{};
  std::vector<scheduler::SeqId> seqs;  // [n]: the sample's sequence, 0 once that sample has ended
  int32_t num_unfinished = 0;
  bool first_token_seen = false;
  std::vector<int32_t> stop_ids;  // eos (unless ignore_eos) + stop_token_ids; masked below min_tokens
  std::string error;              // set when sampling failed in this step
  scheduler::FinishReason last_reason = scheduler::FinishReason::kNone;
};

inline double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace sparkserve::engine
