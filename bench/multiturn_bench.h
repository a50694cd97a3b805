// `bench serve --dataset multiturn` (multiturn_bench.cc): synthetic multi-turn conversations with a
// shared system prompt, one wave per turn index; TTFT per turn and the prefix-cache hit rate.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "bench/serve_runner.h"
#include "nlohmann/json.hpp"

namespace sparkserve::bench {

struct MultiturnOptions {
  int users = 8;
  int turns = 4;
  int system_words = 1000;  // the shared system prompt
  int user_words = 100;     // each user turn
  int output_len = 64;      // max_tokens, and the words of each synthetic reply in the history
  unsigned long seed = 0;
};

// Per turn index: every user's request (BenchPrompt::prompt holds the messages as JSON).
std::vector<std::vector<BenchPrompt>> MultiturnDataset(const MultiturnOptions& o);

// Runs the turns one after another; prints a table; returns it as JSON. `scrape_metrics` returns
// the server's /metrics text (empty when unavailable).
nlohmann::json RunMultiturn(const MultiturnOptions& o, ServeRunOptions ropts, const OutputTokenCounter& count_output,
                            const std::function<std::string()>& scrape_metrics);

}  // namespace sparkserve::bench
