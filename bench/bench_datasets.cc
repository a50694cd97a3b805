// Dataset builders (see bench_datasets.h). Random text is drawn from a list of common words and
// trimmed/extended against the token counter until it has exactly the requested length.
#include "bench/bench_datasets.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::bench {
namespace {

using Json = nlohmann::json;

class ServerTokenCounter : public PromptTokenCounter {
 public:
  ServerTokenCounter(HttpTarget t, std::string model, std::string key)
      : target_(std::move(t)), model_(std::move(model)), key_(std::move(key)) {}
  absl::StatusOr<int> Count(const std::string& text) override {
    HttpRequestSpec spec;
    spec.path = "/tokenize";
    spec.body = Json{{"model", model_}, {"prompt", text}, {"add_special_tokens", false}}.dump();
    spec.api_key = key_;
    spec.timeout_s = 60;
    auto r = FetchHttp(target_, std::move(spec));
    if (!r.ok()) return r.status();
    if (r->http_status != 200) {
      return absl::UnavailableError(fmt::format("POST /tokenize: HTTP {}: {}", r->http_status, r->body));
    }
    const Json j = Json::parse(r->body, nullptr, false);
    if (j.is_object() && j.contains("count") && j["count"].is_number_integer()) return j["count"].get<int>();
    if (j.is_object() && j.contains("tokens") && j["tokens"].is_array()) return static_cast<int>(j["tokens"].size());
    return absl::UnavailableError(fmt::format("POST /tokenize: no \"count\" or \"tokens\" in {}", r->body.substr(0, 200)));
  }
  std::string name() const override { return "server /tokenize"; }

 private:
  HttpTarget target_;
  std::string model_, key_;
};

class LocalTokenCounter : public PromptTokenCounter {
 public:
  explicit LocalTokenCounter(const text::Tokenizer* tok) : tok_(tok) {}
  absl::StatusOr<int> Count(const std::string& text) override {
    auto ids = tok_->Encode(text, /*add_special_tokens=*/false);
    if (!ids.ok()) return ids.status();
    return static_cast<int>(ids->size());
  }
  std::string name() const override { return "local tokenizer"; }

 private:
  const text::Tokenizer* tok_;
};

class WordCounter : public PromptTokenCounter {
 public:
  absl::StatusOr<int> Count(const std::string& text) override {
    std::istringstream in(text);
    std::string w;
    int n = 0;
    while (in >> w) ++n;
    return n;
  }
  std::string name() const override { return "whitespace words (approximate: no /tokenize, no --tokenizer)"; }
};

constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "it",    "that",  "for",   "you",   "was",   "with",
    "on",    "as",    "have",  "but",   "be",    "they",  "at",    "one",   "this",  "from",  "or",    "had",
    "by",    "not",   "word",  "what",  "all",   "were",  "we",    "when",  "your",  "can",   "said",  "there",
    "use",   "an",    "each",  "which", "she",   "do",    "how",   "their", "if",    "will",  "up",    "other",
    "about", "out",   "many",  "then",  "them",  "these", "so",    "some",  "her",   "would", "make",  "like",
    "him",   "into",  "time",  "has",   "look",  "two",   "more",  "write", "go",    "see",   "number", "no",
    "way",   "could", "people", "my",   "than",  "first", "water", "been",  "call",  "who",   "oil",   "its",
    "now",   "find",  "long",  "down",  "day",   "did",   "get",   "come",  "made",  "may",   "part",  "over"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string Join(const std::vector<size_t>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) s.push_back(' ');
    s += kWords[words[i]];
  }
  return s;
}

// Random words whose text has exactly `target` tokens (or the closest found, with its count).
absl::StatusOr<BenchPrompt> ExactRandomText(std::mt19937_64& rng, int target, PromptTokenCounter& counter) {
  std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
  std::vector<size_t> words;
  for (int i = 0; i < target; ++i) words.push_back(pick(rng));
  BenchPrompt best;
  int best_diff = INT32_MAX;
  for (int iter = 0; iter < 64; ++iter) {
    const std::string text = Join(words);
    ASSIGN_OR_RETURN(const int n, counter.Count(text));
    if (std::abs(n - target) < best_diff) {
      best_diff = std::abs(n - target);
      best.prompt = text;
      best.prompt_len = n;
    }
    if (n == target) break;
    if (n < target) {
      for (int i = 0; i < target - n; ++i) words.push_back(pick(rng));
    } else {
      const int drop = std::max(1, (n - target) / 2);
      for (int i = 0; i < drop && words.size() > 1; ++i) words.pop_back();
      if (iter > 8 && !words.empty()) words.back() = pick(rng);  // break 2-token oscillations
    }
  }
  return best;
}

std::pair<int, int> LenRange(int len, double ratio) {
  return {static_cast<int>(std::floor(len * (1.0 - ratio))), static_cast<int>(std::ceil(len * (1.0 + ratio)))};
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("--dataset-path '{}': cannot open", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::vector<BenchPrompt>> ShareGpt(const DatasetOptions& o, PromptTokenCounter& counter) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(o.path));
  const Json j = Json::parse(text, nullptr, false);
  if (!j.is_array()) {
    return absl::InvalidArgumentError(
        fmt::format("--dataset-path '{}': not a ShareGPT file (expected a JSON list of {{\"conversations\": [...]}})",
                    o.path));
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const Json& entry : j) {
    if (!entry.is_object() || !entry.contains("conversations") || !entry["conversations"].is_array()) continue;
    std::string human, gpt;
    bool has_h = false, has_g = false;
    for (const Json& turn : entry["conversations"]) {
      if (!turn.is_object() || !turn.contains("from") || !turn.contains("value") || !turn["value"].is_string()) continue;
      const std::string from = turn["from"].is_string() ? turn["from"].get<std::string>() : "";
      if (!has_h && from == "human") {
        human = turn["value"].get<std::string>();
        has_h = true;
      } else if (has_h && !has_g && from == "gpt") {
        gpt = turn["value"].get<std::string>();
        has_g = true;
      }
    }
    if (has_h && has_g) pairs.emplace_back(std::move(human), std::move(gpt));
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<BenchPrompt> out;
  for (auto& [human, gpt] : pairs) {
    if (static_cast<int>(out.size()) >= o.num_prompts) break;
    ASSIGN_OR_RETURN(const int in_len, counter.Count(human));
    ASSIGN_OR_RETURN(const int out_len, counter.Count(gpt));
    // vLLM's filter: drop tiny and over-long pairs.
    if (in_len < 4 || out_len < 4 || in_len > 1024 || in_len + out_len > 2048) continue;
    out.push_back({human, in_len, out_len});
  }
  if (static_cast<int>(out.size()) < o.num_prompts) {
    return absl::InvalidArgumentError(fmt::format("--dataset-path '{}': only {} usable conversations for {} prompts",
                                                  o.path, out.size(), o.num_prompts));
  }
  return out;
}

}  // namespace

std::unique_ptr<PromptTokenCounter> MakeServerTokenCounter(HttpTarget target, std::string model, std::string api_key) {
  return std::make_unique<ServerTokenCounter>(std::move(target), std::move(model), std::move(api_key));
}
std::unique_ptr<PromptTokenCounter> MakeLocalTokenCounter(const text::Tokenizer* tok) {
  return std::make_unique<LocalTokenCounter>(tok);
}
std::unique_ptr<PromptTokenCounter> MakeWordCounter() { return std::make_unique<WordCounter>(); }

absl::StatusOr<std::vector<BenchPrompt>> BuildDataset(const DatasetOptions& o, PromptTokenCounter& counter) {
  if (o.num_prompts < 1) return absl::InvalidArgumentError("--num-prompts must be >= 1");
  if (o.random_range_ratio < 0 || o.random_range_ratio >= 1) {
    return absl::InvalidArgumentError("--random-range-ratio must be in [0, 1)");
  }
  if (o.name == "sharegpt") {
    if (o.path.empty()) return absl::InvalidArgumentError("--dataset sharegpt needs --dataset-path FILE.json");
    return ShareGpt(o, counter);
  }
  std::mt19937_64 rng(o.seed);
  auto [out_lo, out_hi] = LenRange(o.random_output_len, o.random_range_ratio);
  std::uniform_int_distribution<int> out_dist(std::max(1, out_lo), std::max(1, out_hi));
  std::vector<BenchPrompt> out;
  if (o.name == "prompts") {
    if (o.path.empty()) return absl::InvalidArgumentError("--dataset prompts needs --dataset-path FILE (one prompt a line)");
    ASSIGN_OR_RETURN(const std::string text, ReadFile(o.path));
    std::istringstream in(text);
    std::string line;
    std::vector<std::string> lines;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) lines.push_back(line);
    }
    if (lines.empty()) return absl::InvalidArgumentError(fmt::format("--dataset-path '{}': no prompts", o.path));
    for (int i = 0; i < o.num_prompts; ++i) {  // cycle when fewer lines than prompts
      const std::string& p = lines[static_cast<size_t>(i) % lines.size()];
      ASSIGN_OR_RETURN(const int n, counter.Count(p));
      out.push_back({p, n, out_dist(rng)});
    }
    return out;
  }
  if (o.name != "random" && o.name != "prefix") {
    return absl::InvalidArgumentError(
        fmt::format("--dataset '{}': expected random, sharegpt, prefix or prompts", o.name));
  }
  if (o.random_input_len < 1) return absl::InvalidArgumentError("--random-input-len must be >= 1");
  std::string prefix;
  if (o.name == "prefix") {
    if (o.prefix_len < 1) return absl::InvalidArgumentError("--dataset prefix needs --prefix-len >= 1");
    ASSIGN_OR_RETURN(BenchPrompt p, ExactRandomText(rng, o.prefix_len, counter));
    prefix = p.prompt + " ";
  }
  auto [in_lo, in_hi] = LenRange(o.random_input_len, o.random_range_ratio);
  std::uniform_int_distribution<int> in_dist(std::max(1, in_lo), std::max(1, in_hi));
  int inexact = 0;
  for (int i = 0; i < o.num_prompts; ++i) {
    const int in_len = in_dist(rng);
    ASSIGN_OR_RETURN(BenchPrompt p, ExactRandomText(rng, in_len, counter));
    if (p.prompt_len != in_len) ++inexact;
    if (!prefix.empty()) {
      p.prompt = prefix + p.prompt;
      ASSIGN_OR_RETURN(p.prompt_len, counter.Count(p.prompt));
    }
    p.output_len = out_dist(rng);
    out.push_back(std::move(p));
  }
  if (inexact > 0) {
    spdlog::warn("{} of {} prompts could not be built with exactly the drawn token length (closest kept; "
                 "input_lens records the real counts)", inexact, o.num_prompts);
  }
  return out;
}

}  // namespace sparkserve::bench
