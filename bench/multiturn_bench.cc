// `bench serve --dataset multiturn`: synthetic conversations. Every user shares one system prompt
// (--prefix-len words) and sends --turns turns of --random-input-len words, each turn the whole
// history so far (earlier user turns, and as replies --random-output-len synthetic words: a
// history fixed in advance, so runs with and without a prefix cache send the same requests). Turn
// t of every user goes out together (--max-concurrency caps it) after turn t - 1 finished; the
// report gives TTFT per turn index and the server's prefix-cache hit rate (vLLM's
// prefix_cache_hits/queries counters) per turn.
#include "bench/multiturn_bench.h"

#include <cstdio>
#include <random>
#include <sstream>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::bench {

using Json = nlohmann::json;

namespace {

constexpr const char* kWords[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                                  "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
                                  "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "yankee"};

std::string Words(int n, std::mt19937_64& rng) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
  }
  return out;
}

// The server's prefix-cache counters (queried tokens, hit tokens); zeros when it has none.
std::pair<double, double> PrefixCounts(const std::string& metrics) {
  std::istringstream in(metrics);
  std::string line;
  double queries = 0, hits = 0;
  const auto value = [](const std::string& l) { return std::strtod(l.c_str() + l.rfind(' ') + 1, nullptr); };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.find("prefix_cache_queries_total{") != std::string::npos) queries = value(line);
    if (line.find("prefix_cache_hits_total{") != std::string::npos) hits = value(line);
  }
  return {queries, hits};
}

}  // namespace

std::vector<std::vector<BenchPrompt>> MultiturnDataset(const MultiturnOptions& o) {
  std::mt19937_64 rng(o.seed);
  const std::string system = Words(o.system_words, rng);
  std::vector<std::vector<BenchPrompt>> turns(static_cast<size_t>(o.turns));
  for (int u = 0; u < o.users; ++u) {
    Json messages = Json::array({{{"role", "system"}, {"content", fmt::format("{}", system)}}});
    for (int t = 0; t < o.turns; ++t) {
      messages.push_back({{"role", "user"}, {"content", fmt::format("user {} turn {}: {}", u, t, Words(o.user_words, rng))}});
      BenchPrompt p;
      p.prompt = messages.dump();
      p.output_len = o.output_len;
      turns[static_cast<size_t>(t)].push_back(std::move(p));
      messages.push_back({{"role", "assistant"}, {"content", Words(o.output_len, rng)}});
    }
  }
  return turns;
}

Json RunMultiturn(const MultiturnOptions& o, ServeRunOptions ropts, const OutputTokenCounter& count_output,
                  const std::function<std::string()>& scrape_metrics) {
  ropts.messages_json = true;
  ropts.endpoint = "/v1/chat/completions";
  const auto turns = MultiturnDataset(o);
  Json rows = Json::array();
  std::printf("%-5s %8s %9s %14s %14s %10s\n", "turn", "requests", "failed", "mean TTFT ms", "p50 TTFT ms",
              "hit rate");
  double all_q = 0, all_h = 0;
  for (size_t t = 0; t < turns.size(); ++t) {
    const auto before = PrefixCounts(scrape_metrics());
    ropts.progress_label = fmt::format("turn {} ", t);
    const ServeRunResult r = RunServeBenchmark(turns[t], ropts, count_output);
    const auto after = PrefixCounts(scrape_metrics());
    std::vector<double> ttft;
    int failed = 0;
    for (const auto& x : r.outcomes) {
      if (x.success) {
        ttft.push_back(x.ttft * 1e3);
      } else {
        ++failed;
      }
    }
    double mean = 0;
    for (double v : ttft) mean += v;
    mean = ttft.empty() ? 0 : mean / static_cast<double>(ttft.size());
    const double q = after.first - before.first, h = after.second - before.second;
    all_q += q;
    all_h += h;
    const double rate = q > 0 ? h / q : 0.0;
    std::printf("%-5zu %8zu %9d %14.1f %14.1f %9.1f%%\n", t, r.outcomes.size(), failed, mean,
                Percentile(ttft, 50), rate * 100);
    rows.push_back({{"turn", t}, {"requests", r.outcomes.size()}, {"failed", failed}, {"mean_ttft_ms", mean},
                    {"median_ttft_ms", Percentile(ttft, 50)}, {"prefix_cache_queries", q},
                    {"prefix_cache_hits", h}, {"hit_rate", rate}, {"duration", r.duration_s}});
    if (r.interrupted) break;
  }
  std::printf("prefix cache hit rate over all turns: %.1f%%\n", all_q > 0 ? 100 * all_h / all_q : 0.0);
  std::fflush(stdout);
  return Json{{"turns", rows}, {"hit_rate", all_q > 0 ? all_h / all_q : 0.0}, {"users", o.users},
              {"system_words", o.system_words}, {"user_words", o.user_words}};
}

}  // namespace sparkserve::bench
