// Asynchronous HTTP/1.1 client on Boost.Beast for the serving benchmark: one TCP connection per
// request, all requests multiplexed on one io_context thread (no thread per request). A streaming
// POST hands each body piece to the caller with its arrival time; a whole-body fetch serves
// /v1/models, /tokenize and /metrics. Plain http:// only (no TLS). Every request has a deadline;
// connect errors, timeouts and HTTP >= 400 complete with an error, never hang.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"

namespace sparkserve::bench {

using Clock = std::chrono::steady_clock;

struct HttpTarget {
  std::string host;
  std::string port;       // "80" when the URL has none
  std::string base_path;  // path prefix from the URL without a trailing '/', e.g. "" or "/api"
};
// "http://host[:port][/prefix]" -> target. https:// and other schemes are refused.
absl::StatusOr<HttpTarget> ParseHttpUrl(const std::string& url);

struct HttpRequestSpec {
  std::string method = "POST";  // "GET" or "POST"
  std::string path;             // appended to target.base_path
  std::string body;             // JSON for POST
  std::string api_key;          // Authorization: Bearer, when non-empty
  double timeout_s = 600;       // whole request, connect to last byte
};

// Outcome of one request: `status` is OK, or the transport/timeout error. `http_status` is 0 when
// no response header arrived. For a streaming request, `body` holds the body only when the status
// code is >= 400 (the error text); otherwise pieces went to the callback.
struct HttpResult {
  absl::Status status;
  int http_status = 0;
  std::string body;
};

// A streaming request in flight; Cancel() aborts it (its completion then reports `reason`).
class HttpCall {
 public:
  virtual ~HttpCall() = default;
  virtual void Cancel(const std::string& reason) = 0;
};

using BodyPieceCallback = std::function<void(std::string_view piece, Clock::time_point when)>;
using DoneCallback = std::function<void(HttpResult result)>;

// Starts a request on `io`; `on_piece` gets body bytes as they arrive (2xx only), `on_done` is
// called exactly once. Both run on the io_context's thread.
std::shared_ptr<HttpCall> StartHttpCall(boost::asio::io_context& io, const HttpTarget& target,
                                        HttpRequestSpec spec, BodyPieceCallback on_piece, DoneCallback on_done);

// Blocking whole-body request on a private io_context (set-up calls: /v1/models, /tokenize,
// /metrics). Transport errors are a Status; HTTP errors come back in http_status/body.
absl::StatusOr<HttpResult> FetchHttp(const HttpTarget& target, HttpRequestSpec spec);

}  // namespace sparkserve::bench
