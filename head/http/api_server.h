// ApiServer: the request router of `sparkserve serve`: API-key check, the OpenAI, Anthropic and
// vLLM-style endpoints, /health and /metrics, each API's error JSON, and a log line per request
// that is not a generation (generations log themselves when they finish).
#pragma once
#include <memory>
#include <string>

#include "boost/asio/thread_pool.hpp"
#include "head/http/http_server.h"
#include "head/http/metrics.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

class ApiServer {
 public:
  // `ctx` and `metrics` must outlive the server. `worker_threads` render chat templates and
  // tokenize (off the I/O threads, which then keep answering /health and streaming); 0 handles
  // everything on the calling thread (the fuzz target's deterministic mode).
  ApiServer(const ServingContext& ctx, ServingMetrics* metrics, int worker_threads = 2);
  ~ApiServer();  // Join()s

  // Runs the tasks the workers hold, then joins them (idempotent). A task holds its request's
  // channel, and a channel must not outlive its HttpServer: call this after HttpServer::Stop() and
  // before the server is destroyed (and before the engine and codec it reads).
  void Join();

  // The HttpServer's RequestHandler. Requests with heavy work (the generate, token counting and
  // tokenize routes) continue on a worker thread.
  void Handle(HttpRequest req, std::shared_ptr<ResponseChannel> channel);

  // HttpServerOptions::error_response: errors the transport makes (413, 503, 400) in the path's API shape.
  static HttpResponse TransportError(int status, const std::string& path, const std::string& message);

 private:
  bool Authorized(const HttpRequest& req) const;
  bool Ready() const;
  void HandleOnWorker(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& channel);
  void Reply(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& channel, HttpResponse r);

  const ServingContext& ctx_;
  ServingMetrics* metrics_;
  std::unique_ptr<boost::asio::thread_pool> workers_;  // null: inline
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace sparkserve::head::http
