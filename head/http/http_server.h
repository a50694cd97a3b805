// HttpServer: the async HTTP/1.1 server (Boost.Beast on a few I/O threads, one strand per
// connection): keep-alive, body-size limit (413), read/write timeouts, chunked streaming for SSE,
// client-disconnect detection, and graceful drain (new requests get 503 while in-flight ones finish).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/io_context.hpp"

namespace sparkserve::head::http {

struct HttpRequest {
  std::string method;                        // "GET", "POST", ...
  std::string path;                          // target without the query string
  std::string query;                         // after '?', may be empty
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string remote;                        // peer address, for logs

  // The header's value, or "" when absent. `name` must be lower case.
  const std::string& Header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
};

// How a handler answers one request. Exactly one of Respond() or StartStream() (then Write()*,
// End()) is called. Every method may be called from any thread: it posts onto the connection's
// strand. Callbacks given here run on that strand too.
class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;
  virtual void Respond(HttpResponse response) = 0;
  // Sends the status line and headers with chunked transfer encoding.
  virtual void StartStream(int status, std::string content_type,
                           std::vector<std::pair<std::string, std::string>> headers = {}) = 0;
  virtual void Write(std::string chunk) = 0;
  virtual void End() = 0;
  // Called at most once, on the strand, when the client closes the connection (or a write fails)
  // before the response ended. The channel drops the callback once the response is finished, and
  // with it what the callback holds (a generation's state holds the channel: no cycle outlives it).
  virtual void OnClientGone(std::function<void()> callback) = 0;
  // The connection's strand: post work here to keep a request's state single-threaded.
  virtual boost::asio::any_io_executor executor() = 0;
};

using RequestHandler = std::function<void(HttpRequest, std::shared_ptr<ResponseChannel>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                 // 0 = ephemeral
  int io_threads = 2;
  uint64_t max_body_bytes = 32u << 20;  // larger bodies get 413
  std::chrono::seconds read_timeout{60};   // header + body of one request, and keep-alive idle
  std::chrono::seconds write_timeout{60};  // one write to a slow client
  // Open connections at most; one more is answered 503 ("too many connections") and closed.
  int64_t max_connections = 1024;
  // Bytes of a streamed response waiting for a client that does not read; past it the client
  // counts as gone (its request is cancelled) instead of the server buffering without end.
  uint64_t max_pending_write_bytes = 16u << 20;
  // The error body for responses the server itself makes (413, 503 while draining, 400 on
  // unparsable HTTP): (status, path, message) -> response. Lets each API keep its error JSON.
  std::function<HttpResponse(int, const std::string&, const std::string&)> error_response;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, RequestHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens, then runs the I/O threads. Returns once listening.
  absl::Status Start();
  uint16_t port() const { return bound_port_; }

  // Stop accepting work: from now on new requests get 503 (Connection: close); requests in
  // flight continue.
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  // Requests whose response has not ended.
  int64_t in_flight() const { return in_flight_.load(); }
  // Open client connections (refused ones not counted).
  int64_t connections() const;
  // Waits until no request is in flight or `timeout` passed; true when drained.
  bool WaitDrained(std::chrono::milliseconds timeout) const;
  // Closes the listener and every connection, stops and joins the I/O threads.
  void Stop();

  boost::asio::io_context& io_context() { return ioc_; }

  // Internal (used by connections).
  struct Shared;

 private:
  HttpServerOptions options_;
  boost::asio::io_context ioc_;
  std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  uint16_t bound_port_ = 0;
  bool stopped_ = false;
};

}  // namespace sparkserve::head::http
