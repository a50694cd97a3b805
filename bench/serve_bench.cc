// Orchestration of `sparkserve bench serve` (see serve_bench.h).
#include "bench/serve_bench.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/bench_datasets.h"
#include "bench/http_stream_client.h"
#include "bench/multiturn_bench.h"
#include "bench/serve_metrics.h"
#include "bench/serve_report.h"
#include "bench/serve_runner.h"
#include "core/status.h"
#include "fmt/format.h"
#include "text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::bench {
namespace {

using Json = nlohmann::json;

absl::StatusOr<std::string> FirstModel(const HttpTarget& t, const std::string& key) {
  HttpRequestSpec spec;
  spec.method = "GET";
  spec.path = "/v1/models";
  spec.api_key = key;
  spec.timeout_s = 30;
  ASSIGN_OR_RETURN(HttpResult r, FetchHttp(t, std::move(spec)));
  if (r.http_status != 200) return absl::UnavailableError(fmt::format("GET /v1/models: HTTP {}: {}", r.http_status, r.body));
  const Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return absl::UnavailableError(fmt::format("GET /v1/models: no model listed in {}", r.body.substr(0, 200)));
  }
  return j["data"][0]["id"].get<std::string>();
}

Json MetricsSnapshot(const HttpTarget& t, const std::string& key) {
  HttpRequestSpec spec;
  spec.method = "GET";
  spec.path = "/metrics";
  spec.api_key = key;
  spec.timeout_s = 10;
  auto r = FetchHttp(t, std::move(spec));
  if (r.ok() && r->http_status == 200) return r->body;
  return nullptr;
}

// Speculative decoding counters of the server's /metrics (vLLM's names under any prefix).
struct SpecCounts {
  bool present = false;
  double drafts = 0, draft_tokens = 0, accepted = 0;
  std::vector<double> per_pos;
};

SpecCounts ScrapeSpecCounts(const HttpTarget& t, const std::string& key) {
  SpecCounts c;
  const Json body = MetricsSnapshot(t, key);
  if (!body.is_string()) return c;
  std::istringstream in(body.get<std::string>());
  std::string line;
  const auto value = [](const std::string& l) { return std::strtod(l.c_str() + l.rfind(' ') + 1, nullptr); };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.find("spec_decode_num_drafts_total{") != std::string::npos) {
      c.present = true;
      c.drafts = value(line);
    } else if (line.find("spec_decode_num_draft_tokens_total{") != std::string::npos) {
      c.draft_tokens = value(line);
    } else if (line.find("spec_decode_num_accepted_tokens_total{") != std::string::npos) {
      c.accepted = value(line);
    } else if (line.find("spec_decode_num_accepted_tokens_per_pos_total{") != std::string::npos) {
      const size_t at = line.find("position=\"");
      if (at == std::string::npos) continue;
      const auto pos = static_cast<size_t>(std::strtol(line.c_str() + at + 10, nullptr, 10));
      if (c.per_pos.size() <= pos) c.per_pos.resize(pos + 1, 0.0);
      c.per_pos[pos] = value(line);
    }
  }
  return c;
}

// What changed between two scrapes, as `vllm bench serve` prints it; empty when the server has no
// speculation counters or drafted nothing.
std::string FormatSpec(const SpecCounts& before, const SpecCounts& after, Json* out) {
  if (!before.present || !after.present) return "";
  const double drafts = after.drafts - before.drafts, tokens = after.draft_tokens - before.draft_tokens;
  const double accepted = after.accepted - before.accepted;
  std::vector<double> per_pos;
  for (size_t i = 0; i < after.per_pos.size(); ++i) {
    const double b = i < before.per_pos.size() ? before.per_pos[i] : 0.0;
    per_pos.push_back(drafts > 0 ? (after.per_pos[i] - b) / drafts : 0.0);
  }
  const double rate = tokens > 0 ? 100.0 * accepted / tokens : 0.0;
  const double length = drafts > 0 ? 1.0 + accepted / drafts : 1.0;
  (*out)["spec_decode_acceptance_rate"] = rate;
  (*out)["spec_decode_acceptance_length"] = length;
  (*out)["spec_decode_num_drafts"] = drafts;
  (*out)["spec_decode_draft_tokens"] = tokens;
  (*out)["spec_decode_accepted_tokens"] = accepted;
  (*out)["spec_decode_per_position_acceptance_rates"] = per_pos;
  std::string s = fmt::format("{:-^50}\n", "Speculative Decoding");
  s += fmt::format("{:<40}{:<10.2f}\n", "Acceptance rate (%):", rate);
  s += fmt::format("{:<40}{:<10.2f}\n", "Acceptance length:", length);
  s += fmt::format("{:<40}{:<10.0f}\n", "Drafts:", drafts);
  s += fmt::format("{:<40}{:<10.0f}\n", "Draft tokens:", tokens);
  s += fmt::format("{:<40}{:<10.0f}\n", "Accepted tokens:", accepted);
  s += "Per-position acceptance (%):\n";
  for (size_t i = 0; i < per_pos.size(); ++i) s += fmt::format("  Position {}: {:.2f}\n", i, 100.0 * per_pos[i]);
  s += std::string(50, '=') + "\n";
  return s;
}

std::string NowIso() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string PlotScript() {
  if (const char* env = std::getenv("SPARKSERVE_PLOT_SCRIPT")) return env;
  return SPARKSERVE_BENCH_PLOT_SCRIPT;
}

int Plot(const std::string& json_path, const std::string& dir) {
  const char* py = std::getenv("SPARKSERVE_PYTHON");
  const std::string cmd = fmt::format("\"{}\" \"{}\" \"{}\" \"{}\"", py ? py : "python3", PlotScript(), json_path, dir);
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    spdlog::error("--plot: the plot script failed ({}); the JSON is saved at {}", cmd, json_path);
    return 3;
  }
  return 0;
}

}  // namespace

namespace {

// --dataset multiturn: its own loop of turns (multiturn_bench.h).
int RunMultiturnBench(const BenchServeArgs& a, const HttpTarget& target, const std::string& model,
                      const text::Tokenizer* tok) {
  if (a.num_prompts < 1 || a.turns < 1) {
    spdlog::error("bench serve: --dataset multiturn needs --num-prompts (users) and --turns >= 1");
    return 1;
  }
  MultiturnOptions o;
  o.users = a.num_prompts;
  o.turns = a.turns;
  o.system_words = a.prefix_len > 0 ? a.prefix_len : 1000;
  o.user_words = a.random_input_len;
  o.output_len = a.random_output_len;
  o.seed = a.seed;
  ServeRunOptions ropts;
  ropts.target = target;
  ropts.model = model;
  ropts.api_key = a.api_key;
  ropts.max_concurrency = a.max_concurrency;
  ropts.ignore_eos = a.ignore_eos;
  ropts.extra_body = a.extra_body;
  ropts.request_timeout_s = a.request_timeout_s;
  ropts.seed = a.seed;
  ropts.progress = !a.no_progress;
  OutputTokenCounter count_output;
  if (tok != nullptr) {
    count_output = [tok](const std::string& text) {
      auto ids = tok->Encode(text, false);
      return ids.ok() ? static_cast<int>(ids->size()) : 0;
    };
  }
  Json result = RunMultiturn(o, ropts, count_output, [&] {
    const Json m = MetricsSnapshot(target, a.api_key);
    return m.is_string() ? m.get<std::string>() : std::string();
  });
  result["date"] = NowIso();
  result["command"] = a.command_line;
  result["dataset"] = "multiturn";
  result["model_id"] = model;
  if (!a.save_result.empty()) {
    std::ofstream out(a.save_result);
    out << result.dump(2) << "\n";
    if (!out) {
      spdlog::error("bench serve: --save-result '{}': cannot write", a.save_result);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int RunBenchServe(const BenchServeArgs& a) {
  auto fail = [](const absl::Status& s) {
    spdlog::error("bench serve: {}", std::string(s.message()));
    return 1;
  };
  auto target = ParseHttpUrl(a.url);
  if (!target.ok()) return fail(target.status());
  if (a.endpoint != "/v1/completions" && a.endpoint != "/v1/chat/completions") {
    return fail(absl::InvalidArgumentError(
        fmt::format("--endpoint '{}': expected /v1/completions or /v1/chat/completions", a.endpoint)));
  }
  if (a.request_rate <= 0) return fail(absl::InvalidArgumentError("--request-rate must be > 0 (inf: all at once)"));
  if (a.burstiness <= 0) return fail(absl::InvalidArgumentError("--burstiness must be > 0"));
  if (a.request_timeout_s <= 0) return fail(absl::InvalidArgumentError("--request-timeout must be > 0"));
  for (int c : a.sweep_concurrency) {
    if (c < 1) return fail(absl::InvalidArgumentError("--sweep-concurrency values must be >= 1"));
  }
  auto slo = ParseGoodput(a.goodput);
  if (!slo.ok()) return fail(slo.status());

  std::string model = a.model;
  if (model.empty()) {
    auto m = FirstModel(*target, a.api_key);
    if (!m.ok()) return fail(m.status());
    model = *m;
  }
  std::unique_ptr<text::Tokenizer> tok;
  if (!a.tokenizer.empty()) {
    auto t = text::Tokenizer::Load(a.tokenizer);
    if (!t.ok()) return fail(core::Annotate(t.status(), "--tokenizer"));
    tok = std::move(*t);
  }
  std::unique_ptr<PromptTokenCounter> counter;
  if (tok) {
    counter = MakeLocalTokenCounter(tok.get());
  } else {
    counter = MakeServerTokenCounter(*target, model, a.api_key);
    auto probe = counter->Count("hello world");
    if (!probe.ok()) {
      spdlog::warn("server /tokenize unavailable ({}); prompt lengths counted as whitespace words",
                   std::string(probe.status().message()));
      counter = MakeWordCounter();
      if (a.dataset == "random" || a.dataset == "prefix") {
        return fail(absl::FailedPreconditionError(fmt::format(
            "--dataset {} needs exact token lengths: the server has no usable /tokenize; pass --tokenizer DIR",
            a.dataset)));
      }
    }
  }
  spdlog::info("bench serve: model '{}', prompt tokens counted by {}", model, counter->name());

  if (a.dataset == "multiturn") return RunMultiturnBench(a, *target, model, tok.get());

  DatasetOptions dopts;
  dopts.name = a.dataset;
  dopts.path = a.dataset_path;
  dopts.num_prompts = a.num_prompts;
  dopts.random_input_len = a.random_input_len;
  dopts.random_output_len = a.random_output_len;
  dopts.random_range_ratio = a.random_range_ratio;
  dopts.prefix_len = a.prefix_len;
  dopts.seed = a.seed;
  auto prompts = BuildDataset(dopts, *counter);
  if (!prompts.ok()) return fail(prompts.status());

  OutputTokenCounter count_output;
  if (tok) {
    count_output = [&tok](const std::string& text) {
      auto ids = tok->Encode(text, false);
      return ids.ok() ? static_cast<int>(ids->size()) : 0;
    };
  }

  ServeRunOptions ropts;
  ropts.target = *target;
  ropts.endpoint = a.endpoint;
  ropts.model = model;
  ropts.api_key = a.api_key;
  ropts.request_rate = a.request_rate;
  ropts.burstiness = a.burstiness;
  ropts.ignore_eos = a.ignore_eos;
  ropts.extra_body = a.extra_body;
  ropts.request_timeout_s = a.request_timeout_s;
  ropts.seed = a.seed;
  ropts.progress = !a.no_progress;

  std::vector<int> concurrencies = a.sweep_concurrency;
  const bool sweep = !concurrencies.empty();
  if (!sweep) concurrencies.push_back(a.max_concurrency);

  Json runs = Json::array();
  bool interrupted = false;
  for (int c : concurrencies) {
    ropts.max_concurrency = c;
    if (a.warmup > 0) {
      std::vector<BenchPrompt> warm;
      for (int i = 0; i < a.warmup; ++i) warm.push_back((*prompts)[static_cast<size_t>(i) % prompts->size()]);
      ServeRunOptions wopts = ropts;
      wopts.request_rate = std::numeric_limits<double>::infinity();
      wopts.progress_label = "warmup ";
      const ServeRunResult w = RunServeBenchmark(warm, wopts, count_output);
      int wfailed = 0;
      for (const auto& o : w.outcomes) wfailed += o.success ? 0 : 1;
      if (wfailed > 0) spdlog::warn("warm-up: {} of {} requests failed", wfailed, w.outcomes.size());
      if (w.interrupted) {
        interrupted = true;
        break;
      }
    }
    ropts.progress_label = sweep ? fmt::format("concurrency {} ", c) : "";
    const SpecCounts spec_before = ScrapeSpecCounts(*target, a.api_key);
    const ServeRunResult r = RunServeBenchmark(*prompts, ropts, count_output);
    const SpecCounts spec_after = ScrapeSpecCounts(*target, a.api_key);
    const ServeMetrics m = ComputeMetrics(r.outcomes, r.duration_s, *slo);
    RunDescription d;
    d.request_rate = a.request_rate;
    d.burstiness = a.burstiness;
    d.max_concurrency = c;
    d.goodput = !slo->empty();
    d.interrupted = r.interrupted;
    d.output_token_source = DescribeTokenSources(r);
    std::fputs(FormatSummary(m, d).c_str(), stdout);
    Json spec_json = Json::object();
    std::fputs(FormatSpec(spec_before, spec_after, &spec_json).c_str(), stdout);
    std::fflush(stdout);
    for (const auto& o : r.outcomes) {
      if (!o.success) {
        spdlog::warn("first failed request: {}", o.error);
        break;
      }
    }
    Json run = RunResultJson(m, d, r);
    run.update(spec_json);
    runs.push_back(std::move(run));
    if (r.interrupted) {
      interrupted = true;
      break;
    }
  }

  Json result = sweep ? Json{{"sweep_concurrency", a.sweep_concurrency}, {"runs", runs}} : runs.at(0);
  result["date"] = NowIso();
  result["command"] = a.command_line;
  result["backend"] = "openai-compatible";
  result["endpoint_type"] = a.endpoint == "/v1/completions" ? "openai" : "openai-chat";
  result["endpoint"] = a.endpoint;
  result["url"] = a.url;
  result["model_id"] = model;
  result["tokenizer_id"] = a.tokenizer.empty() ? nullptr : Json(a.tokenizer);
  result["prompt_token_counter"] = counter->name();
  result["dataset"] = a.dataset;
  result["num_prompts"] = a.num_prompts;
  result["warmup"] = a.warmup;
  result["seed"] = a.seed;
  result["server_metrics"] = MetricsSnapshot(*target, a.api_key);

  std::string json_path = a.save_result;
  if (json_path.empty() && !a.plot_dir.empty()) {
    std::filesystem::create_directories(a.plot_dir);
    json_path = (std::filesystem::path(a.plot_dir) / "result.json").string();
  }
  int rc = interrupted ? 130 : 0;
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << result.dump(2) << "\n";
    if (!out) return fail(absl::UnavailableError(fmt::format("--save-result '{}': cannot write", json_path)));
    spdlog::info("results saved to {}", json_path);
  }
  if (!a.plot_dir.empty()) {
    const int prc = Plot(json_path, a.plot_dir);
    if (prc != 0 && rc == 0) rc = prc;
  }
  return rc;
}

}  // namespace sparkserve::bench
