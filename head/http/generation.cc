// GenerationRun: the per-request state machine between the engine's token events and a formatter.
#include "head/http/generation.h"

#include <random>

#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "fmt/format.h"
#include "head/http/sample_text.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head::http {

using Clock = std::chrono::steady_clock;
using scheduler::FinishReason;

std::string RandomHex(int n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kDigits = "0123456789abcdef";
  std::string s(static_cast<size_t>(n), '0');
  for (auto& c : s) c = kDigits[rng() & 15];
  return s;
}

std::string SseData(const Json& j) { return fmt::format("data: {}\n\n", DumpJson(j)); }
std::string SseEvent(const std::string& name, const Json& j) {
  return fmt::format("event: {}\ndata: {}\n\n", name, DumpJson(j));
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

const char* FinishName(FinishReason f) {
  switch (f) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    default: return "none";
  }
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class GenerationRun : public std::enable_shared_from_this<GenerationRun> {
 public:
  GenerationRun(const ServingContext& ctx, ServingMetrics* metrics,
                std::shared_ptr<ResponseChannel> channel, ApiFlavor flavor, GenerationSetup setup,
                std::unique_ptr<GenerationFormatter> formatter, RequestInfo info)
      : ctx_(ctx),
        metrics_(metrics),
        channel_(std::move(channel)),
        flavor_(flavor),
        setup_(std::move(setup)),
        formatter_(std::move(formatter)),
        info_(std::move(info)) {
    requests_.push_back(std::move(setup_.request));
    for (auto& r : setup_.more_requests) requests_.push_back(std::move(r));
    setup_.more_requests.clear();
    n_ = std::max(1, requests_.front().n);
    // One compiled stop-string set and one parser maker for all samples of all prompts: nothing a
    // request carries is copied per sample.
    std::shared_ptr<const text::StopStringSet> stops;
    if (!setup_.stop_strings.empty()) {
      auto set = text::StopStringSet::Create(setup_.stop_strings);
      if (set.ok()) stops = std::move(*set);  // the field readers already refused empty strings
    }
    PieceParserMaker make_parser;
    if (setup_.parse_output && ctx_.parser_factory) make_parser = ctx_.parser_factory(setup_.parser_options);
    for (size_t i = 0; i < requests_.size() * static_cast<size_t>(n_); ++i) {
      samples_.push_back(Sample{
          std::make_unique<SampleText>(ctx_.codec->NewDecoder(setup_.skip_special_tokens),
                                       make_parser ? make_parser() : nullptr, stops,
                                       setup_.include_stop_str_in_output),
          SampleResult{}, false, false});
    }
    for (const auto& r : requests_) prompt_tokens_ += static_cast<int64_t>(r.prompt_ids.size());
  }

  void Start() {
    auto self = shared_from_this();
    auto exec = channel_->executor();
    for (size_t p = 0; p < requests_.size(); ++p) {
      const int32_t first_sample = static_cast<int32_t>(p) * n_;
      engine::TokenSink sink = [self, exec, first_sample](const scheduler::TokenEvent& ev) {
        boost::asio::post(exec, [self, ev, first_sample] { self->OnEvent(ev, first_sample); });
      };
      scheduler::Request req = std::move(requests_[p]);
      req.n = n_;
      req.stop.stop_strings = setup_.stop_strings;
      req.stop.include_stop_str_in_output = setup_.include_stop_str_in_output;
      auto id = ctx_.engine->Submit(std::move(req), std::move(sink));
      if (!id.ok()) {
        // The prompts accepted so far go too: the response is all or nothing.
        ApiError e = ApiErrorFromStatus(id.status());
        done_ = true;
        for (scheduler::RequestId accepted : ids_) ctx_.engine->Cancel(accepted);
        Log(e.status, "rejected", std::string(id.status().message()));
        if (metrics_) metrics_->CountHttpResponse(e.status);
        channel_->Respond(ErrorResponse(flavor_, e));
        return;
      }
      ids_.push_back(*id);
    }
    requests_.clear();
    submitted_ = true;
    ended_early_.assign(ids_.size(), false);
    channel_->OnClientGone([self] { self->ClientGone(); });
    if (setup_.stream && !done_) formatter_->Begin();
  }

 private:
  struct Sample {
    std::unique_ptr<SampleText> text;
    SampleResult result;
    bool done = false;             // no more output for the client
    bool engine_finished = false;  // the engine sent its last event
    int64_t cached_tokens = 0;     // prompt tokens the prefix cache held for it
  };

  // Per prompt: the tokens its first sample resumed from the prefix cache (n > 1 samples share the
  // prompt, counted once as prompt_tokens are).
  int64_t CachedTokens() const {
    int64_t cached = 0;
    for (size_t i = 0; i < samples_.size(); i += static_cast<size_t>(n_)) cached += samples_[i].cached_tokens;
    return cached;
  }

  void ClientGone() {
    client_gone_ = true;
    if (!done_ && submitted_) {
      for (scheduler::RequestId id : ids_) ctx_.engine->Cancel(id);
    }
  }

  void Absorb(Sample& s, const std::vector<OutputPiece>& pieces) {
    for (const auto& p : pieces) {
      switch (p.kind) {
        case OutputPiece::Kind::kContent: s.result.content += p.text; break;
        case OutputPiece::Kind::kReasoning: s.result.reasoning += p.text; break;
        case OutputPiece::Kind::kToolCallName:
          while (static_cast<int32_t>(s.result.tool_calls.size()) <= p.tool_index) {
            s.result.tool_calls.push_back(ToolCallResult{setup_.tool_id_prefix + RandomHex(24), "", ""});
          }
          s.result.tool_calls[p.tool_index].name += p.text;
          break;
        case OutputPiece::Kind::kToolCallArguments:
          while (static_cast<int32_t>(s.result.tool_calls.size()) <= p.tool_index) {
            s.result.tool_calls.push_back(ToolCallResult{setup_.tool_id_prefix + RandomHex(24), "", ""});
          }
          s.result.tool_calls[p.tool_index].arguments += p.text;
          break;
      }
    }
    AppendPieces(s.result.pieces, pieces);
  }

  // `ev` of the engine request whose samples start at `first_sample`.
  void OnEvent(scheduler::TokenEvent ev, int32_t first_sample) {
    if (done_) return;
    if (ev.index < 0 || ev.index >= n_) {
      spdlog::error("http: engine event for sample {} of a {}-sample request", ev.index, n_);
      return;
    }
    ev.index += first_sample;
    Sample& s = samples_[ev.index];
    if (ev.finish != FinishReason::kNone) s.engine_finished = true;
    if (!ev.ids.empty()) s.cached_tokens = ev.cached_tokens;
    if (s.done) return MaybeEndAfterStops(ev.index / n_);
    auto now = Clock::now();
    if (!ev.ids.empty() && !first_token_) first_token_ = now;
    s.result.ids.insert(s.result.ids.end(), ev.ids.begin(), ev.ids.end());
    s.result.logprobs.insert(s.result.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    s.result.top_logprobs.insert(s.result.top_logprobs.end(), ev.top_logprobs.begin(),
                                 ev.top_logprobs.end());
    SampleText::Update upd = s.text->Push(ev.ids);
    bool finished = ev.finish != FinishReason::kNone || upd.stop_string.has_value();
    if (finished && !upd.stop_string) {
      SampleText::Update tail = s.text->Finish();
      AppendPieces(upd.pieces, std::move(tail.pieces));
      if (tail.stop_string) upd.stop_string = tail.stop_string;
    }
    Absorb(s, upd.pieces);
    if (setup_.stream && !client_gone_) formatter_->Delta(ev.index, upd.pieces, ev, s.result);
    if (!finished) return;
    s.done = true;
    s.result.finish = upd.stop_string ? FinishReason::kStop : ev.finish;
    s.result.stop_string = upd.stop_string;
    s.result.error = ev.error;
    ++done_count_;
    if (s.result.finish == FinishReason::kAbort && !client_gone_) {
      // Not asked for here (a cancel follows a hang-up): the engine ended it, at shutdown after the
      // drain timeout.
      return Fail("the server is shutting down and aborted this request", /*unavailable=*/true);
    }
    if (s.result.finish == FinishReason::kError) return Fail(ev.error, ev.unavailable);
    if (setup_.stream && !client_gone_) formatter_->SampleFinished(ev.index, s.result);
    MaybeEndAfterStops(ev.index / n_);
    if (done_count_ == static_cast<int>(samples_.size())) Complete();
  }

  // Every sample of engine request `p` is done for the client but the engine still runs some
  // (stop strings): end that request.
  void MaybeEndAfterStops(int32_t p) {
    if (ended_early_[p]) return;
    bool engine_running = false;
    for (int32_t i = p * n_; i < (p + 1) * n_; ++i) {
      if (!samples_[i].done) return;
      engine_running = engine_running || !samples_[i].engine_finished;
    }
    if (!engine_running) return;
    ended_early_[p] = true;
    ctx_.engine->Finish(ids_[p], FinishReason::kStop);  // stop strings: ends as stopped
  }

  Usage MakeUsage() const {
    Usage u{prompt_tokens_, 0, CachedTokens()};
    for (const auto& s : samples_) u.completion_tokens += static_cast<int64_t>(s.result.ids.size());
    return u;
  }

  // `unavailable`: the server cannot run or finish it now (a lost tensor-parallel node, or shutting
  // down): 503, retry later.
  void Fail(const std::string& message, bool unavailable) {
    done_ = true;
    for (size_t p = 0; p < ids_.size(); ++p) {
      if (!ended_early_[p]) ctx_.engine->Cancel(ids_[p]);
    }
    const int status = unavailable ? 503 : 500;
    ApiError e{status, fmt::format("generation failed: {}", message), "", unavailable ? 5 : 0};
    if (metrics_) metrics_->CountHttpResponse(setup_.stream ? 200 : status);
    Log(setup_.stream ? 200 : status, "error", message);
    formatter_->Failed(e);
  }

  void Complete() {
    done_ = true;
    std::vector<SampleResult> results;
    results.reserve(samples_.size());
    for (auto& s : samples_) results.push_back(std::move(s.result));
    const char* finish = client_gone_ ? "abort" : FinishName(results[0].finish);
    if (metrics_) metrics_->CountHttpResponse(200);
    completion_tokens_ = 0;
    for (const auto& r : results) completion_tokens_ += static_cast<int64_t>(r.ids.size());
    Log(200, finish, "");
    Usage usage{prompt_tokens_, completion_tokens_, CachedTokens()};
    formatter_->Finished(results, usage);
  }

  void Log(int status, const char* finish, const std::string& detail) {
    double ms = Seconds(Clock::now() - info_.arrival) * 1e3;
    double ttft_ms = first_token_ ? Seconds(*first_token_ - info_.arrival) * 1e3 : -1.0;
    spdlog::info(
        "request id={} method={} path={} remote={} status={} stream={} n={} prompt_tokens={} "
        "completion_tokens={} finish={} ttft_ms={:.1f} latency_ms={:.1f}{}{}",
        info_.response_id, info_.method, info_.path, info_.remote, status, setup_.stream,
        samples_.size(), prompt_tokens_, completion_tokens_, finish, ttft_ms, ms,
        detail.empty() ? "" : " detail=", detail);
  }

  const ServingContext& ctx_;
  ServingMetrics* metrics_;
  std::shared_ptr<ResponseChannel> channel_;
  ApiFlavor flavor_;
  GenerationSetup setup_;
  std::unique_ptr<GenerationFormatter> formatter_;
  RequestInfo info_;
  std::vector<scheduler::Request> requests_;  // until submitted
  int32_t n_ = 1;                             // samples per engine request
  std::vector<Sample> samples_;               // request p's sample i at p * n_ + i
  std::vector<scheduler::RequestId> ids_;     // the engine's, per request
  std::vector<bool> ended_early_;             // per request: Finish() sent after stop strings
  bool submitted_ = false;
  bool done_ = false;
  bool client_gone_ = false;
  int done_count_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  std::optional<Clock::time_point> first_token_;
};

}  // namespace

void StartGeneration(const ServingContext& ctx, ServingMetrics* metrics,
                     std::shared_ptr<ResponseChannel> channel, ApiFlavor flavor,
                     GenerationSetup setup, std::unique_ptr<GenerationFormatter> formatter,
                     RequestInfo info) {
  auto exec = channel->executor();
  auto run = std::make_shared<GenerationRun>(ctx, metrics, std::move(channel), flavor,
                                             std::move(setup), std::move(formatter), std::move(info));
  // The run's state lives on the connection's strand; handlers call this from a worker thread.
  boost::asio::dispatch(exec, [run] { run->Start(); });
}

}  // namespace sparkserve::head::http
