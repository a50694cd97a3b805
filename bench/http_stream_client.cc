// Beast-based HTTP/1.1 calls (see http_stream_client.h). One HttpSession object per request owns
// its resolver, socket, deadline timer and response parser; handlers keep it alive via
// shared_from_this until the single completion.
#include "bench/http_stream_client.h"

#include <array>
#include <cstdint>
#include <limits>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "fmt/format.h"

namespace sparkserve::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class HttpSession : public HttpCall, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(asio::io_context& io, HttpTarget target, HttpRequestSpec spec, BodyPieceCallback on_piece,
              DoneCallback on_done)
      : resolver_(io),
        socket_(io),
        deadline_(io),
        target_(std::move(target)),
        spec_(std::move(spec)),
        on_piece_(std::move(on_piece)),
        on_done_(std::move(on_done)) {}

  void Start() {
    auto self = shared_from_this();
    deadline_.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec_.timeout_s)));
    deadline_.async_wait([self](beast::error_code ec) {
      if (!ec) self->Abort(fmt::format("request timed out after {:g} s", self->spec_.timeout_s));
    });
    request_.method(spec_.method == "GET" ? http::verb::get : http::verb::post);
    request_.target(target_.base_path + spec_.path);
    request_.version(11);
    request_.set(http::field::host, target_.host + ":" + target_.port);
    request_.set(http::field::user_agent, "sparkserve-bench");
    request_.set(http::field::accept, "*/*");
    request_.keep_alive(false);
    if (!spec_.api_key.empty()) request_.set(http::field::authorization, "Bearer " + spec_.api_key);
    if (spec_.method != "GET") {
      request_.set(http::field::content_type, "application/json");
      request_.body() = spec_.body;
    }
    request_.prepare_payload();
    resolver_.async_resolve(target_.host, target_.port,
                            [self](beast::error_code ec, tcp::resolver::results_type results) {
                              if (ec) return self->Fail(ec, "resolve " + self->target_.host);
                              asio::async_connect(self->socket_, results,
                                                  [self](beast::error_code ec2, const tcp::endpoint&) {
                                                    if (ec2) return self->Fail(ec2, "connect");
                                                    self->Write();
                                                  });
                            });
  }

  void Cancel(const std::string& reason) override {
    auto self = shared_from_this();
    asio::post(socket_.get_executor(), [self, reason] { self->Abort(reason); });
  }

 private:
  void Write() {
    auto self = shared_from_this();
    http::async_write(socket_, request_, [self](beast::error_code ec, size_t) {
      if (ec) return self->Fail(ec, "write");
      self->parser_.body_limit(std::numeric_limits<std::uint64_t>::max());  // Boost 1.74 treats none as 0
      http::async_read_header(self->socket_, self->buffer_, self->parser_, [self](beast::error_code ec2, size_t) {
        if (ec2) return self->Fail(ec2, "read header");
        self->result_.http_status = static_cast<int>(self->parser_.get().result_int());
        self->ReadBody();
      });
    });
  }

  void ReadBody() {
    if (parser_.is_done()) return Finish();
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
    auto self = shared_from_this();
    http::async_read_some(socket_, buffer_, parser_, [self](beast::error_code ec, size_t) {
      const Clock::time_point now = Clock::now();
      const size_t got = self->chunk_.size() - self->parser_.get().body().size;
      if (ec == http::error::need_buffer) ec = {};
      if (got > 0 && !self->done_) {
        std::string_view piece(self->chunk_.data(), got);
        if (self->result_.http_status >= 400) {
          self->result_.body.append(piece);
        } else if (self->on_piece_) {
          self->on_piece_(piece, now);
        }
      }
      if (ec == http::error::end_of_stream || ec == http::error::partial_message) {
        return self->Fail(ec, "connection closed before the response body ended");
      }
      if (ec) return self->Fail(ec, "read body");
      self->ReadBody();
    });
  }

  void Finish() {
    if (done_) return;
    if (result_.http_status >= 400) {
      result_.status = absl::UnavailableError(fmt::format("HTTP {}: {}", result_.http_status, result_.body));
    }
    Complete();
  }
  void Fail(const beast::error_code& ec, const std::string& what) {
    if (done_) return;
    result_.status = absl::UnavailableError(fmt::format("{}: {}", what, ec.message()));
    Complete();
  }
  void Abort(const std::string& reason) {
    if (done_) return;
    result_.status = absl::DeadlineExceededError(reason);
    Complete();
  }
  void Complete() {
    done_ = true;
    beast::error_code ignored;
    deadline_.cancel();
    resolver_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    DoneCallback done = std::move(on_done_);
    on_piece_ = nullptr;
    if (done) done(std::move(result_));
  }

  tcp::resolver resolver_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  HttpTarget target_;
  HttpRequestSpec spec_;
  BodyPieceCallback on_piece_;
  DoneCallback on_done_;
  http::request<http::string_body> request_;
  http::response_parser<http::buffer_body> parser_;
  beast::flat_buffer buffer_;
  std::array<char, 16384> chunk_{};
  HttpResult result_;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<HttpTarget> ParseHttpUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0) {
    return absl::InvalidArgumentError(fmt::format("--url '{}': https is not supported (plain http:// only)", url));
  }
  if (url.rfind(scheme, 0) != 0) {
    return absl::InvalidArgumentError(fmt::format("--url '{}': expected http://HOST[:PORT][/PREFIX]", url));
  }
  std::string rest = url.substr(scheme.size());
  HttpTarget t;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) t.base_path = rest.substr(slash);
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  if (hostport.empty()) return absl::InvalidArgumentError(fmt::format("--url '{}': no host", url));
  size_t colon = std::string::npos;
  if (hostport.front() == '[') {  // [v6]:port
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return absl::InvalidArgumentError(fmt::format("--url '{}': bad IPv6 host", url));
    t.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size() && hostport[close + 1] == ':') colon = close + 1;
  } else {
    colon = hostport.rfind(':');
    t.host = hostport.substr(0, colon);
  }
  t.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  if (t.port.empty() || t.port.find_first_not_of("0123456789") != std::string::npos) {
    return absl::InvalidArgumentError(fmt::format("--url '{}': bad port '{}'", url, t.port));
  }
  return t;
}

std::shared_ptr<HttpCall> StartHttpCall(asio::io_context& io, const HttpTarget& target, HttpRequestSpec spec,
                                        BodyPieceCallback on_piece, DoneCallback on_done) {
  auto session = std::make_shared<HttpSession>(io, target, std::move(spec), std::move(on_piece), std::move(on_done));
  session->Start();
  return session;
}

absl::StatusOr<HttpResult> FetchHttp(const HttpTarget& target, HttpRequestSpec spec) {
  asio::io_context io;
  std::string body;
  HttpResult out;
  StartHttpCall(
      io, target, std::move(spec), [&](std::string_view piece, Clock::time_point) { body.append(piece); },
      [&](HttpResult r) { out = std::move(r); });
  io.run();
  if (out.http_status >= 400) {
    out.status = absl::OkStatus();
    return out;
  }
  if (!out.status.ok()) return out.status;
  out.body = std::move(body);
  return out;
}

}  // namespace sparkserve::bench
