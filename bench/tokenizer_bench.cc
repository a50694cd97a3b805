// tokenizer_bench TOKENIZER_JSON_OR_DIR TEXT_FILE [ITERS]: single-threaded encode speed of
// sparkserve's tokenizer on one text (the whole file as one string): load time, first (cold cache)
// and best warm pass. Prints one JSON line; bench/tokenizer_bench.py compares it with HF tokenizers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "head/tokenizer/tokenizer.h"

namespace {
double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON_OR_DIR TEXT_FILE [ITERS]\n", argv[0]);
    return 2;
  }
  const int iters = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[2]);
    return 1;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto tok = sparkserve::tokenizer::Tokenizer::Load(argv[1]);
  const auto t1 = Clock::now();
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  auto ids = (*tok)->Encode(text, false);
  const auto t2 = Clock::now();
  if (!ids.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ids.status().message()).c_str());
    return 1;
  }
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    auto again = (*tok)->Encode(text, false);
    const auto b = Clock::now();
    if (!again.ok() || *again != *ids) {
      std::fprintf(stderr, "encode is not deterministic\n");
      return 1;
    }
    best = std::min(best, Seconds(a, b));
  }
  const double cold = Seconds(t1, t2);
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf(
      "{\"impl\": \"sparkserve\", \"bytes\": %zu, \"tokens\": %zu, \"load_s\": %.4f, \"cold_s\": %.4f, "
      "\"warm_s\": %.4f, \"cold_mb_per_s\": %.2f, \"warm_mb_per_s\": %.2f}\n",
      text.size(), ids->size(), Seconds(t0, t1), cold, best, mb / cold, mb / best);
  return 0;
}
