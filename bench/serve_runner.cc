// Load generation and stream accounting for `sparkserve bench serve` (see serve_runner.h).
#include "bench/serve_runner.h"

#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <random>

#include "bench/sse_parser.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::bench {
namespace {

using Json = nlohmann::json;
namespace asio = boost::asio;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class ProgressBar {
 public:
  ProgressBar(bool on, int total, std::string label) : on_(on), total_(total), label_(std::move(label)) {}
  void Update(int done, int failed, double elapsed) {
    if (!on_) return;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? done * kWidth / total_ : kWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s[%s] %d/%d requests, %d failed, %.1fs", label_.c_str(), bar.c_str(), done, total_,
                 failed, elapsed);
    std::fflush(stderr);
  }
  void End() {
    if (on_) std::fputs("\n", stderr);
  }

 private:
  bool on_;
  int total_;
  std::string label_;
};

// One benchmark run's state on the io_context thread.
class Run {
 public:
  Run(const std::vector<BenchPrompt>& prompts, const ServeRunOptions& opts, const OutputTokenCounter& count_output)
      : prompts_(prompts),
        opts_(opts),
        count_output_(count_output),
        arrival_timer_(io_),
        grace_timer_(io_),
        signals_(io_, SIGINT),
        progress_(opts.progress, static_cast<int>(prompts.size()), opts.progress_label) {
    result_.outcomes.resize(prompts.size());
    offsets_ = ArrivalOffsets(static_cast<int>(prompts.size()), opts.request_rate, opts.burstiness, opts.seed);
  }

  ServeRunResult Go() {
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (!ec) OnInterrupt();
    });
    start_ = Clock::now();
    last_completion_ = start_;
    ScheduleArrivals();
    io_.run();
    progress_.End();
    result_.duration_s = Seconds(last_completion_ - start_);
    if (sent_ < prompts_.size()) result_.outcomes.resize(sent_);  // interrupted: unsent ones dropped
    return std::move(result_);
  }

 private:
  // Releases every prompt whose arrival time has passed, then waits for the next one.
  void ScheduleArrivals() {
    if (stopping_) return;
    const double now = Seconds(Clock::now() - start_);
    while (next_arrival_ < prompts_.size() && offsets_[next_arrival_] <= now) arrived_.push_back(next_arrival_++);
    LaunchReady();
    if (next_arrival_ < prompts_.size()) {
      arrival_timer_.expires_at(start_ + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(offsets_[next_arrival_])));
      arrival_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) ScheduleArrivals();
      });
    }
  }

  void LaunchReady() {
    while (!stopping_ && !arrived_.empty() &&
           (opts_.max_concurrency <= 0 || in_flight_ < static_cast<size_t>(opts_.max_concurrency))) {
      const size_t i = arrived_.front();
      arrived_.pop_front();
      Launch(i);
    }
    MaybeStop();
  }

  void Launch(size_t i) {
    ++in_flight_;
    ++sent_;
    const Clock::time_point sent_at = Clock::now();
    RequestOutcome& o = result_.outcomes[i];
    o.prompt_len = prompts_[i].prompt_len;
    o.start_time = Seconds(sent_at - start_);
    auto state = std::make_shared<StreamState>();
    auto current_time = std::make_shared<double>(0.0);
    auto parser = std::make_shared<SseParser>([&o, state, current_time](std::string_view data) {
      if (!state->done) ApplySsePayload(data, *current_time, o, *state);
    });
    HttpRequestSpec spec;
    spec.path = opts_.endpoint;
    spec.body = BuildRequestBody(opts_, prompts_[i]);
    spec.api_key = opts_.api_key;
    spec.timeout_s = opts_.request_timeout_s;
    calls_[i] = StartHttpCall(
        io_, opts_.target, std::move(spec),
        [parser, current_time, sent_at](std::string_view piece, Clock::time_point when) {
          *current_time = Seconds(when - sent_at);
          parser->Feed(piece);
        },
        [this, i, parser, state](HttpResult r) {
          if (r.status.ok()) parser->Finish();
          Complete(i, r, *state);
        });
  }

  void Complete(size_t i, const HttpResult& r, const StreamState& st) {
    RequestOutcome& o = result_.outcomes[i];
    calls_.erase(i);
    --in_flight_;
    last_completion_ = Clock::now();
    if (!r.status.ok()) {
      o.success = false;
      if (o.error.empty()) o.error = std::string(r.status.message());
    } else if (!o.error.empty()) {
      o.success = false;  // an error payload inside the stream
    } else if (!st.first_chunk) {
      o.success = false;
      o.error = "Never received a valid chunk to calculate TTFT.";
    } else if (!st.done) {
      o.success = false;
      o.error = "stream ended before data: [DONE]";
    } else {
      o.success = true;
      o.latency = st.last_chunk_time;
      if (st.usage_completion_tokens >= 0) {
        o.output_tokens = st.usage_completion_tokens;
        o.output_token_source = "usage";
      } else if (count_output_) {
        o.output_tokens = count_output_(o.generated_text);
        o.output_token_source = "tokenizer";
      } else {
        o.output_tokens = st.chunks;
        o.output_token_source = "chunks";
      }
    }
    ++completed_;
    if (!o.success) ++failed_;
    progress_.Update(completed_, failed_, Seconds(last_completion_ - start_));
    LaunchReady();
  }

  void OnInterrupt() {
    if (stopping_) {  // a second Ctrl-C: no grace
      CancelInFlight();
      return;
    }
    stopping_ = true;
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (!ec) OnInterrupt();
    });
    result_.interrupted = true;
    arrival_timer_.cancel();
    std::fprintf(stderr, "\ninterrupted: no more requests; waiting up to %.0fs for %zu in flight\n",
                 opts_.interrupt_grace_s, in_flight_);
    grace_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(opts_.interrupt_grace_s)));
    grace_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) CancelInFlight();
    });
    MaybeStop();
  }

  void CancelInFlight() {
    auto calls = calls_;  // Cancel completes asynchronously; copy to iterate safely
    for (auto& [idx, call] : calls) call->Cancel("interrupted (SIGINT) before the response ended");
  }

  void MaybeStop() {
    const bool all_sent = next_arrival_ >= prompts_.size() && arrived_.empty();
    if (in_flight_ == 0 && (all_sent || stopping_)) {
      arrival_timer_.cancel();
      grace_timer_.cancel();
      signals_.cancel();
    }
  }

  const std::vector<BenchPrompt>& prompts_;
  const ServeRunOptions& opts_;
  const OutputTokenCounter& count_output_;
  asio::io_context io_;
  asio::steady_timer arrival_timer_;
  asio::steady_timer grace_timer_;
  asio::signal_set signals_;
  ProgressBar progress_;
  ServeRunResult result_;
  std::vector<double> offsets_;
  std::deque<size_t> arrived_;
  std::map<size_t, std::shared_ptr<HttpCall>> calls_;
  size_t next_arrival_ = 0;
  size_t in_flight_ = 0;
  size_t sent_ = 0;
  int completed_ = 0;
  int failed_ = 0;
  bool stopping_ = false;
  Clock::time_point start_;
  Clock::time_point last_completion_;
};

}  // namespace

std::vector<double> ArrivalOffsets(int n, double rate, double burstiness, unsigned long seed) {
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (n <= 0 || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < t.size(); ++i) {
    if (std::isinf(burstiness)) {
      t[i] = 1.0 / rate;
    } else {
      std::gamma_distribution<double> gamma(burstiness, 1.0 / (rate * burstiness));
      t[i] = gamma(rng);
    }
    if (i > 0) t[i] += t[i - 1];
  }
  if (t.back() != 0) {
    const double scale = (static_cast<double>(n) / rate) / t.back();
    for (double& x : t) x *= scale;
  }
  return t;
}

std::string BuildRequestBody(const ServeRunOptions& opts, const BenchPrompt& p) {
  Json body = {{"model", opts.model},
               {"temperature", 0.0},
               {"max_tokens", p.output_len},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (opts.endpoint.find("chat") != std::string::npos) {
    body["messages"] = opts.messages_json ? Json::parse(p.prompt)
                                          : Json::array({{{"role", "user"}, {"content", p.prompt}}});
  } else {
    body["prompt"] = p.prompt;
  }
  if (opts.ignore_eos) body["ignore_eos"] = true;
  if (!opts.extra_body.empty()) {  // validated by RunBenchServe
    const Json extra = Json::parse(opts.extra_body);
    for (const auto& [key, value] : extra.items()) body[key] = value;
  }
  return body.dump();
}

bool ApplySsePayload(std::string_view data, double t, RequestOutcome& o, StreamState& st) {
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) trimmed.remove_suffix(1);
  if (trimmed == "[DONE]") {
    st.done = true;
    return false;
  }
  const Json j = Json::parse(trimmed, nullptr, false);
  if (!j.is_object()) {
    if (o.error.empty()) o.error = fmt::format("unparsable stream chunk: {}", std::string(trimmed.substr(0, 200)));
    return true;
  }
  if (j.contains("error")) {
    const Json& e = j["error"];
    o.error = fmt::format("error in stream: {}",
                          e.is_object() && e.contains("message") && e["message"].is_string()
                              ? e["message"].get<std::string>()
                              : e.dump());
    return true;
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const Json& c = j["choices"][0];
    std::string text;
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].is_object()) {
      const Json& d = c["delta"];
      for (const char* key : {"reasoning_content", "reasoning", "content"}) {
        if (d.contains(key) && d[key].is_string()) text += d[key].get<std::string>();
      }
    }
    if (!st.first_chunk) {
      st.first_chunk = true;
      o.ttft = t;
    } else {
      o.itl.push_back(t - st.last_chunk_time);
    }
    st.last_chunk_time = t;
    ++st.chunks;
    o.generated_text += text;
  }
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens") &&
      j["usage"]["completion_tokens"].is_number_integer()) {
    st.usage_completion_tokens = j["usage"]["completion_tokens"].get<int>();
  }
  return true;
}

ServeRunResult RunServeBenchmark(const std::vector<BenchPrompt>& prompts, const ServeRunOptions& opts,
                                 const OutputTokenCounter& count_output) {
  Run run(prompts, opts, count_output);
  return run.Go();
}

}  // namespace sparkserve::bench
