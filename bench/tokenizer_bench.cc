// tokenizer_bench TOKENIZER_JSON_OR_DIR DOCS_JSONL [ITERS]: single-threaded encode speed of
// sparkserve's tokenizer on documents (one JSON string per line), encoded one by one and as one
// concatenated text: load time, first pass (cold cache) and best warm pass of each. Prints one JSON
// line; bench/tokenizer_bench.py runs it next to HF tokenizers on the same documents.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Runs `pass` once cold and `iters` times warm; returns {cold seconds, best warm seconds}.
std::pair<double, double> Time(int iters, const std::function<size_t()>& pass, size_t* tokens) {
  auto a = Clock::now();
  *tokens = pass();
  const double cold = Seconds(a, Clock::now());
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    a = Clock::now();
    if (pass() != *tokens) std::fprintf(stderr, "encode is not deterministic\n"), std::exit(1);
    best = std::min(best, Seconds(a, Clock::now()));
  }
  return {cold, best};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON_OR_DIR DOCS_JSONL [ITERS]\n", argv[0]);
    return 2;
  }
  const int iters = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[2]);
    return 1;
  }
  std::vector<std::string> docs;
  std::string all, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    docs.push_back(nlohmann::json::parse(line).get<std::string>());
    all += docs.back();
  }

  const auto t0 = Clock::now();
  auto loaded = sparkserve::text::Tokenizer::Load(argv[1]);
  const double load = Seconds(t0, Clock::now());
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const auto& tok = **loaded;
  auto encode = [&](const std::string& s) {
    auto ids = tok.Encode(s, false);
    if (!ids.ok()) std::fprintf(stderr, "%s\n", std::string(ids.status().message()).c_str()), std::exit(1);
    return ids->size();
  };
  size_t doc_tokens = 0, text_tokens = 0;
  const auto [docs_cold, docs_warm] = Time(iters, [&] {
    size_t n = 0;
    for (const auto& d : docs) n += encode(d);
    return n;
  }, &doc_tokens);
  tok.model().ClearCache();
  const auto [text_cold, text_warm] = Time(iters, [&] { return encode(all); }, &text_tokens);
  const double mb = static_cast<double>(all.size()) / 1e6;
  std::printf(
      "{\"impl\": \"sparkserve\", \"bytes\": %zu, \"docs\": %zu, \"doc_tokens\": %zu, \"text_tokens\": %zu, "
      "\"load_s\": %.3f, \"docs_cold_mb_s\": %.2f, \"docs_warm_mb_s\": %.2f, \"text_cold_mb_s\": %.2f, "
      "\"text_warm_mb_s\": %.2f}\n",
      all.size(), docs.size(), doc_tokens, text_tokens, load, mb / docs_cold, mb / docs_warm, mb / text_cold,
      mb / text_warm);
  return 0;
}
