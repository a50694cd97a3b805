// ApiServer: routing, auth, the small endpoints (models, tokenize, detokenize, health, metrics).
#include "head/http/api_server.h"

#include <chrono>

#include "boost/asio/post.hpp"

#include "fmt/format.h"
#include "head/http/anthropic_messages.h"
#include "head/http/api_error.h"
#include "head/http/openai_chat.h"
#include "head/http/openai_completions.h"
#include "head/http/sampling_fields.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head::http {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

ApiServer::ApiServer(const ServingContext& ctx, ServingMetrics* metrics, int worker_threads)
    : ctx_(ctx),
      metrics_(metrics),
      workers_(worker_threads > 0 ? std::make_unique<boost::asio::thread_pool>(static_cast<size_t>(worker_threads))
                                  : nullptr) {}

ApiServer::~ApiServer() { Join(); }

void ApiServer::Join() {
  if (workers_) workers_->join();
}

// `serve` publishes the engine and codec, then sets *ready: read them only after seeing it.
bool ApiServer::Ready() const { return ctx_.ready == nullptr || ctx_.ready->load(std::memory_order_acquire); }

HttpResponse ApiServer::TransportError(int status, const std::string& path, const std::string& message) {
  ApiError e{status, message, "", status == 503 ? 1 : 0};
  return ErrorResponse(FlavorOfPath(path), e);
}

bool ApiServer::Authorized(const HttpRequest& req) const {
  if (ctx_.api_key.empty()) return true;
  const std::string& auth = req.Header("authorization");
  static const std::string kBearer = "Bearer ";
  if (auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
      ConstantTimeEquals(auth.substr(kBearer.size()), ctx_.api_key)) {
    return true;
  }
  const std::string& x_key = req.Header("x-api-key");
  return !x_key.empty() && ConstantTimeEquals(x_key, ctx_.api_key);
}

void ApiServer::Reply(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& channel, HttpResponse r) {
  if (metrics_) metrics_->CountHttpResponse(r.status);
  if (req.path != "/health" && req.path != "/metrics") {
    spdlog::info("request method={} path={} remote={} status={} bytes={}", req.method, req.path, req.remote,
                 r.status, r.body.size());
  }
  channel->Respond(std::move(r));
}

namespace {

HttpResponse Ok(const Json& j) { return HttpResponse{200, "application/json", {}, DumpJson(j)}; }

Json ModelsList(const ServingContext& ctx) {
  Json model = {{"id", ctx.model_name}, {"object", "model"}, {"created", ctx.created_unix},
                {"owned_by", "sparkserve"}, {"root", ctx.model_name}, {"parent", nullptr},
                {"max_model_len", ctx.max_seq_len}};
  return Json{{"object", "list"}, {"data", Json::array({model})}};
}

// vLLM's /tokenize: {prompt, add_special_tokens} or {messages, add_generation_prompt, ...}.
Json Tokenize(const ServingContext& ctx, const Json& body) {
  CheckModelName(body, ctx);
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    Json messages = NormalizeChatMessages(body["messages"]);
    Json tools = NormalizeChatTools(body);
    Json kwargs = Json::object();
    if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
      if (!k->is_object()) throw RequestError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
      kwargs = *k;
    }
    ApplyReasoningEffort(body, kwargs);  // the prompt chat completions would render
    bool add_gen = OptBool(body, "add_generation_prompt").value_or(true);
    bool cont = OptBool(body, "continue_final_message").value_or(false);
    std::string prompt = RenderChatPrompt(ctx, messages, tools, add_gen, cont, kwargs).prompt;
    auto enc = ctx.codec->Encode(prompt, OptBool(body, "add_special_tokens").value_or(false));
    if (!enc.ok()) throw RequestError(400, std::string(enc.status().message()));
    ids = std::move(*enc);
  } else {
    auto prompt = OptString(body, "prompt");
    if (!prompt) throw RequestError(400, "'prompt' (a string) or 'messages' is required", "prompt");
    auto enc = ctx.codec->Encode(*prompt, OptBool(body, "add_special_tokens").value_or(true));
    if (!enc.ok()) throw RequestError(400, std::string(enc.status().message()), "prompt");
    ids = std::move(*enc);
  }
  Json out = {{"count", ids.size()}, {"max_model_len", ctx.max_seq_len}, {"tokens", ids}};
  if (OptBool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(ctx.codec->TokenString(id));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return out;
}

Json Detokenize(const ServingContext& ctx, const Json& body) {
  CheckModelName(body, ctx);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) throw RequestError(400, "'tokens' must be an array of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= ctx.codec->vocab_size()) {
      throw RequestError(400, fmt::format("'tokens' must hold token ids in [0, {})", ctx.codec->vocab_size()),
                         "tokens");
    }
    ids.push_back(v.get<int32_t>());
  }
  return Json{{"prompt", ctx.codec->Decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace

void ApiServer::Handle(HttpRequest req, std::shared_ptr<ResponseChannel> channel) {
  const ApiFlavor flavor = FlavorOfPath(req.path);
  const std::string& path = req.path;
  const bool is_get = req.method == "GET";
  const bool is_post = req.method == "POST";
  try {
    if (path == "/health") {
      bool ready = Ready();
      if (!is_get) throw RequestError(405, "use GET /health");
      if (ctx_.cluster) {
        const engine::cluster::ClusterStatus cluster = ctx_.cluster();
        if (!cluster.serving) {
          return Reply(req, channel,
                       ErrorResponse(flavor, ApiError{503, fmt::format("the tensor-parallel group is not serving: {}",
                                                                      cluster.detail),
                                                      "", 5}));
        }
      }
      return Reply(req, channel, ready ? HttpResponse{200, "application/json", {}, "{}"}
                                       : ErrorResponse(flavor, ApiError{503, "the model is loading", "", 1}));
    }
    if (path == "/metrics") {
      if (!is_get) throw RequestError(405, "use GET /metrics");
      engine::EngineStats stats = Ready() && ctx_.engine ? ctx_.engine->Stats() : engine::EngineStats{};
      std::string page = metrics_->Render(stats);
      if (ctx_.cluster) page += RenderClusterMetrics(ctx_.cluster(), ctx_.model_name);
      return Reply(req, channel, HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, std::move(page)});
    }
    if (!Authorized(req)) {
      throw RequestError(401, ctx_.api_key.empty() ? "unauthorized"
                                                   : "invalid or missing API key (send 'Authorization: Bearer KEY' "
                                                     "or 'x-api-key: KEY')");
    }
    bool ready = Ready();
    struct Route {
      const char* path;
      bool post;
      bool needs_model;
    };
    static const Route kRoutes[] = {
        {"/v1/models", false, false},          {"/v1/chat/completions", true, true},
        {"/v1/completions", true, true},       {"/v1/messages", true, true},
        {"/v1/messages/count_tokens", true, true}, {"/tokenize", true, true},
        {"/detokenize", true, true},           {"/version", false, false},
    };
    const Route* route = nullptr;
    for (const auto& r : kRoutes) {
      if (path == r.path) route = &r;
    }
    if (!route) throw RequestError(404, fmt::format("no route for {} {}", req.method, path));
    if (route->post ? !is_post : !is_get) {
      throw RequestError(405, fmt::format("method {} is not allowed on {}; use {}", req.method, path,
                                          route->post ? "POST" : "GET"));
    }
    if (route->needs_model && !ready) throw RequestError(ApiError{503, "the model is loading", "", 5});
    if (route->needs_model && ctx_.cluster) {
      const engine::cluster::ClusterStatus cluster = ctx_.cluster();
      if (!cluster.serving) {
        throw RequestError(ApiError{
            503, fmt::format("the tensor-parallel group is not serving ({}); retry shortly", cluster.detail), "", 5});
      }
    }
    if (path == "/v1/models") return Reply(req, channel, Ok(ModelsList(ctx_)));
    if (path == "/version") return Reply(req, channel, Ok(Json{{"version", "sparkserve"}}));
    // The rest parse bodies, render templates and tokenize: a worker's job.
    if (!workers_) return HandleOnWorker(req, channel);
    boost::asio::post(*workers_, [this, req = std::move(req), channel = std::move(channel)] {
      HandleOnWorker(req, channel);
    });
  } catch (const RequestError& e) {
    return Reply(req, channel, ErrorResponse(flavor, e.error));
  } catch (const std::exception& e) {
    spdlog::error("http: {} {} failed: {}", req.method, path, e.what());
    return Reply(req, channel, ErrorResponse(flavor, ApiError{500, fmt::format("internal error: {}", e.what())}));
  }
}

void ApiServer::HandleOnWorker(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& channel) {
  const ApiFlavor flavor = FlavorOfPath(req.path);
  const std::string& path = req.path;
  try {
    if (path == "/tokenize") return Reply(req, channel, Ok(Tokenize(ctx_, ParseJsonObject(req.body))));
    if (path == "/detokenize") return Reply(req, channel, Ok(Detokenize(ctx_, ParseJsonObject(req.body))));
    if (path == "/v1/messages/count_tokens") return Reply(req, channel, Ok(CountTokens(ctx_, req)));
    if (path == "/v1/chat/completions") return HandleChatCompletions(ctx_, metrics_, req, channel);
    if (path == "/v1/completions") return HandleCompletions(ctx_, metrics_, req, channel);
    if (path == "/v1/messages") return HandleMessages(ctx_, metrics_, req, channel);
  } catch (const RequestError& e) {
    return Reply(req, channel, ErrorResponse(flavor, e.error));
  } catch (const std::exception& e) {
    spdlog::error("http: {} {} failed: {}", req.method, path, e.what());
    return Reply(req, channel, ErrorResponse(flavor, ApiError{500, fmt::format("internal error: {}", e.what())}));
  }
}

}  // namespace sparkserve::head::http
