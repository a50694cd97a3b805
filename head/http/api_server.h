// ApiServer: the request router of `sparkserve serve`: API-key check, the OpenAI, Anthropic and
// vLLM-style endpoints, /health and /metrics, each API's error JSON, and a log line per request
// that is not a generation (generations log themselves when they finish).
#pragma once
#include <memory>
#include <string>

#include "head/http/http_server.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

class ApiServer {
 public:
  // `ctx` and `metrics` must outlive the server.
  ApiServer(const ServingContext& ctx, ServingMetrics* metrics);

  // The HttpServer's RequestHandler.
  void Handle(HttpRequest req, std::shared_ptr<ResponseChannel> channel);

  // HttpServerOptions::error_response: errors the transport makes (413, 503, 400) in the path's API shape.
  static HttpResponse TransportError(int status, const std::string& path, const std::string& message);

 private:
  bool Authorized(const HttpRequest& req) const;
  void Reply(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& channel, HttpResponse r);

  const ServingContext& ctx_;
  ServingMetrics* metrics_;
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace sparkserve::head::http
