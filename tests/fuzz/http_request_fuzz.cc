// libFuzzer target for the HTTP request path: JSON bodies through the real ApiServer routes and
// handlers (OpenAI chat/completions, Anthropic messages/count_tokens, tokenize/detokenize), the
// real tokenizer and Qwen3.5 chat template of ../shared/fixtures, and a scripted engine whose
// output (reasoning, tool calls, anything) comes from the input too.
// Input: [route byte][flags byte][model output] NUL [request body]. Every request must end with
// exactly one complete answer: a full response whose body is JSON, or a stream whose every event
// is JSON and that ends; never a crash, hang, leak or sanitizer report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "head/http/api_server.h"
#include "head/http/model_output_parser.h"
#include "head/http/model_text_codec.h"
#include "nlohmann/json.hpp"
#include "text/constraint/grammar_compiler.h"

namespace {
using namespace sparkserve;
using namespace sparkserve::head::http;

[[noreturn]] void Fail(const std::string& why, const std::string& detail) {
  std::fprintf(stderr, "%s\n%s\n", why.c_str(), detail.substr(0, 2000).c_str());
  std::abort();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ModelTextCodec& Codec() {
  static std::unique_ptr<ModelTextCodec> codec = [] {
    const std::string dir = SPARKSERVE_FIXTURES_DIR;
    auto tok = text::Tokenizer::Load(dir + "/qwen3-tokenizer");
    auto config = nlohmann::ordered_json::parse(ReadFile(dir + "/qwen3-tokenizer/tokenizer_config.json"));
    auto tmpl = text::ChatTemplate::FromConfig(config, {{"default", ReadFile(dir + "/qwen3_5-chat_template.jinja")}});
    if (!tok.ok() || !tmpl.ok()) Fail("cannot load the fixtures", "");
    return std::make_unique<ModelTextCodec>(std::move(*tok), std::move(*tmpl));
  }();
  return *codec;
}

// Structured outputs compile against the fixture's vocabulary (one compiler: its cache is shared
// by the inputs as it is by a server's requests).
std::shared_ptr<text::constraint::GrammarCompiler> Grammars() {
  static auto grammars = std::make_shared<text::constraint::GrammarCompiler>(
      text::constraint::TokenVocabulary::FromTokenizer(Codec().tokenizer(), Codec().vocab_size()));
  return grammars;
}

// Emits `output` (token ids) to every sample right away, through the sink (which posts onto the
// channel's executor, as the real engine's events do).
class ScriptedEngine : public engine::EngineApi {
 public:
  std::vector<int32_t> output;
  bool fail = false;
  absl::Status submit_error;
  int submitted = 0;
  absl::StatusOr<scheduler::RequestId> Submit(scheduler::Request request, engine::TokenSink sink) override {
    if (!submit_error.ok()) return submit_error;
    ++submitted;
    sinks_.push_back(sink);
    for (int i = 0; i < std::max(1, request.n); ++i) {
      int sent = 0;
      for (int32_t id : output) {
        if (sent >= request.max_tokens) break;
        scheduler::TokenEvent ev;
        ev.index = i;
        ev.ids = {id};
        if (request.sampling.logprobs >= 0) {
          ev.logprobs = {{id, -0.5f}};
          ev.top_logprobs = {std::vector<scheduler::TokenLogprob>(request.sampling.logprobs, {id, -0.5f})};
        }
        sink(ev);
        ++sent;
      }
      scheduler::TokenEvent end;
      end.index = i;
      end.finish = fail ? scheduler::FinishReason::kError : sent >= request.max_tokens ? scheduler::FinishReason::kLength
                                                                                      : scheduler::FinishReason::kStop;
      if (fail) end.error = "scripted failure";
      sink(end);
    }
    return scheduler::RequestId(submitted);
  }
  void Cancel(scheduler::RequestId) override {}
  engine::EngineStats Stats() const override { return {}; }

 private:
  std::vector<engine::TokenSink> sinks_;
};

class RecordingChannel : public ResponseChannel {
 public:
  explicit RecordingChannel(boost::asio::io_context& ioc) : ioc_(ioc) {}
  void Respond(HttpResponse r) override {
    if (answered_) Fail("answered twice", r.body);
    answered_ = true;
    response = std::move(r);
    gone = nullptr;  // a finished response drops the callback, as the server's channel does
  }
  void StartStream(int status, std::string, std::vector<std::pair<std::string, std::string>>) override {
    if (answered_) Fail("answered twice", "");
    answered_ = streaming = true;
    response.status = status;
  }
  void Write(std::string chunk) override {
    if (!streaming || ended) Fail("a write outside a stream", chunk);
    response.body += chunk;
  }
  void End() override {
    if (!streaming || ended) Fail("a stream ended twice or never started", "");
    ended = true;
    gone = nullptr;
  }
  void OnClientGone(std::function<void()> cb) override { gone = std::move(cb); }
  boost::asio::any_io_executor executor() override { return ioc_.get_executor(); }

  bool answered() const { return answered_; }
  HttpResponse response;
  bool streaming = false, ended = false;
  std::function<void()> gone;

 private:
  boost::asio::io_context& ioc_;
  bool answered_ = false;
};

const char* kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                         "/tokenize", "/detokenize", "/v1/models", "/health"};

void CheckJson(const std::string& text, const std::string& context) {
  if (!nlohmann::json::accept(text)) Fail("not JSON: " + text.substr(0, 300), context);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const ModelTextCodec& codec = Codec();
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const uint8_t route = data[0], flags = data[1];
  const size_t nul = in.find('\0', 2);
  const std::string_view output_text = in.substr(2, nul == std::string_view::npos ? std::string_view::npos : nul - 2);
  const std::string body(nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1));

  ScriptedEngine engine;
  auto ids = codec.Encode(std::string(output_text), false);
  if (ids.ok()) engine.output = std::move(*ids);
  engine.fail = flags & 1;
  if (flags & 2) engine.submit_error = absl::ResourceExhaustedError("queue full");

  ServingContext ctx;
  ctx.engine = &engine;
  ctx.codec = &codec;
  ctx.parser_factory = MakeModelPieceParserFactory(text::ModelFamily::kQwen3_5);
  ctx.tool_call_markup = ToolCallMarkupFor(text::ModelFamily::kQwen3_5);
  ctx.model_name = "fuzz";
  ctx.max_seq_len = 2048;
  ctx.grammars = Grammars();
  ctx.reasoning_end = "</think>";
  ServingMetrics metrics("fuzz");
  ApiServer api(ctx, &metrics, /*worker_threads=*/0);  // inline: deterministic, one thread

  boost::asio::io_context ioc;
  auto channel = std::make_shared<RecordingChannel>(ioc);
  HttpRequest req;
  req.path = kRoutes[route % (sizeof(kRoutes) / sizeof(kRoutes[0]))];
  req.method = req.path == "/v1/models" || req.path == "/health" ? "GET" : "POST";
  req.body = body;
  api.Handle(req, channel);
  if (flags & 4) {  // the client leaves after the handler returned
    boost::asio::post(ioc, [channel] {
      // Taken out first, as the server does: the callback may end the response (which drops it).
      std::function<void()> cb = std::move(channel->gone);
      channel->gone = nullptr;
      if (cb) cb();
    });
  }
  ioc.run();

  if (!channel->answered()) Fail("no answer", body);
  const HttpResponse& r = channel->response;
  if (r.status < 200 || r.status > 599) Fail("bad status " + std::to_string(r.status), body);
  if (!channel->streaming) {
    if (r.status != 200 || req.path != "/metrics") CheckJson(r.body, body);
    if (r.status == 500 && !engine.fail) Fail("a 500 for a request", r.body + "\n" + body);
    return 0;
  }
  if (!channel->ended) Fail("a stream that never ended", r.body);
  // Every SSE data line is JSON, or [DONE].
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n", pos);
    const std::string payload = r.body.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") CheckJson(payload, r.body);
    pos = end;
  }
  return 0;
}
