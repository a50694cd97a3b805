// Prompt sets for `sparkserve bench serve`: random (exact token lengths), sharegpt (the standard
// ShareGPT JSON), prefix (a shared prefix + random suffixes) and prompts (one per line). Token
// lengths come from a PromptTokenCounter: the server's POST /tokenize or the local tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/http_stream_client.h"

namespace sparkserve::text {
class Tokenizer;
}

namespace sparkserve::bench {

class PromptTokenCounter {
 public:
  virtual ~PromptTokenCounter() = default;
  // Tokens of `text` without special tokens added.
  virtual absl::StatusOr<int> Count(const std::string& text) = 0;
  virtual std::string name() const = 0;  // "server /tokenize", "local tokenizer", ...
};
// vLLM's POST /tokenize {"model", "prompt", "add_special_tokens": false} -> {"count"| "tokens"}.
std::unique_ptr<PromptTokenCounter> MakeServerTokenCounter(HttpTarget target, std::string model, std::string api_key);
std::unique_ptr<PromptTokenCounter> MakeLocalTokenCounter(const text::Tokenizer* tok);
// Whitespace-separated words: the last resort when neither is available (approximate; named so).
std::unique_ptr<PromptTokenCounter> MakeWordCounter();

struct DatasetOptions {
  std::string name = "random";  // random | sharegpt | prefix | prompts
  std::string path;             // sharegpt / prompts
  int num_prompts = 1000;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0.0;
  int prefix_len = 0;
  unsigned long seed = 0;
};

struct BenchPrompt {
  std::string prompt;
  int prompt_len = 0;  // tokens, by the counter
  int output_len = 0;  // max_tokens sent
};

// `counter` may not be a word counter for random/prefix (exact lengths need real tokens).
absl::StatusOr<std::vector<BenchPrompt>> BuildDataset(const DatasetOptions& opts, PromptTokenCounter& counter);

}  // namespace sparkserve::bench
