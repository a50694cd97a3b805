// HttpServer implementation: an acceptor plus one Connection per socket, each on its own strand.
// A connection reads one request at a time (keep-alive), hands it to the handler with a
// ResponseChannel, and while the handler works it watches the socket so that a client that
// hangs up is reported (ResponseChannel::OnClientGone) and its work can be cancelled.
#include "head/http/http_server.h"

#include <netinet/tcp.h>

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <mutex>
#include <optional>

#include "boost/asio/bind_executor.hpp"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

const std::string& HttpRequest::Header(const std::string& name) const {
  static const std::string kEmpty;
  auto it = headers.find(name);
  return it == headers.end() ? kEmpty : it->second;
}

struct HttpServer::Shared {
  Shared(net::io_context& ioc, const HttpServerOptions& opts, RequestHandler h,
         std::atomic<bool>* drain, std::atomic<int64_t>* flight)
      : options(opts), handler(std::move(h)), draining(drain), in_flight(flight), acceptor(net::make_strand(ioc)) {}
  const HttpServerOptions& options;
  RequestHandler handler;
  std::atomic<bool>* draining;
  std::atomic<int64_t>* in_flight;
  std::atomic<int64_t> connections{0};
  // On its own strand: its accept handlers, the retry timer and Stop()'s close never run at once
  // (an acceptor is not thread-safe; with several I/O threads they otherwise would).
  tcp::acceptor acceptor;
  // Accept errors (EMFILE...) are logged at most once a second.
  std::chrono::steady_clock::time_point last_accept_log{};
  int64_t accept_errors_unlogged = 0;
};

namespace {

HttpResponse DefaultErrorResponse(int status, const std::string&, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = fmt::format(R"({{"error": {{"message": "{}", "type": "error", "param": null, "code": {}}}}})",
                       message, status);
  return r;
}

class Connection;

// The channel of one request; forwards onto its connection's strand.
class Channel : public ResponseChannel {
 public:
  explicit Channel(std::shared_ptr<Connection> conn);
  void Respond(HttpResponse response) override;
  void StartStream(int status, std::string content_type,
                   std::vector<std::pair<std::string, std::string>> headers) override;
  void Write(std::string chunk) override;
  void End() override;
  void OnClientGone(std::function<void()> callback) override;
  net::any_io_executor executor() override;

 private:
  std::shared_ptr<Connection> conn_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)), probe_timer_(stream_.get_executor()) {
    shared_->connections.fetch_add(1);
    error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }
  ~Connection() { shared_->connections.fetch_sub(1); }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  // --- called on the strand, through Channel ---
  void Respond(const ResponseChannel* ch, HttpResponse response) {
    if (ch != channel_.get() || state_ != State::kHandling) return;
    state_ = State::kFullResponse;
    if (client_gone_) return FinishResponse();
    SendFull(std::move(response));
  }

  void StartStream(const ResponseChannel* ch, int status, std::string content_type,
                   std::vector<std::pair<std::string, std::string>> headers) {
    if (ch != channel_.get() || state_ != State::kHandling) return;
    state_ = State::kStreaming;
    if (client_gone_) return;
    stream_head_ = std::make_unique<bhttp::response<bhttp::empty_body>>(
        static_cast<bhttp::status>(status), 11);
    stream_head_->set(bhttp::field::server, "sparkserve");
    stream_head_->set(bhttp::field::content_type, content_type);
    stream_head_->set(bhttp::field::cache_control, "no-cache");
    for (auto& [k, v] : headers) stream_head_->set(k, v);
    stream_head_->keep_alive(keep_alive_ && !shared_->draining->load());
    stream_head_->chunked(true);
    serializer_ = std::make_unique<bhttp::response_serializer<bhttp::empty_body>>(*stream_head_);
    writing_ = true;
    stream_.expires_after(shared_->options.write_timeout);
    bhttp::async_write_header(stream_, *serializer_,
                              [self = shared_from_this()](error_code ec, std::size_t) {
                                self->writing_ = false;
                                self->header_written_ = true;
                                if (ec) self->ClientGone();
                                self->Pump();
                              });
  }

  void Write(const ResponseChannel* ch, std::string chunk) {
    if (ch != channel_.get() || state_ != State::kStreaming || chunk.empty()) return;
    if (client_gone_) return;
    QueueChunk(chunk);
    if (pending_.size() > shared_->options.max_pending_write_bytes) {
      spdlog::warn("http: {} reads too slowly ({} bytes waiting); dropping it", remote_, pending_.size());
      return ClientGone();
    }
    Pump();
  }

  void End(const ResponseChannel* ch) {
    if (ch != channel_.get() || state_ != State::kStreaming) return;
    end_requested_ = true;
    if (client_gone_) {
      if (!writing_) FinishResponse();  // else the write's completion finishes it
      return;
    }
    Pump();
  }

  void SetGoneCallback(const ResponseChannel* ch, std::function<void()> cb) {
    if (ch != channel_.get()) return;
    if (client_gone_) {
      cb();
      return;
    }
    gone_callback_ = std::move(cb);
  }

 private:
  enum class State { kReading, kHandling, kFullResponse, kStreaming };

  void QueueChunk(std::string_view chunk) {
    pending_ += fmt::format("{:x}\r\n", chunk.size());
    pending_ += chunk;
    pending_ += "\r\n";
  }

  void DoRead() {
    state_ = State::kReading;
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(shared_->options.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return Close();
    }
    if (ec == bhttp::error::header_limit) {
      return SendServerError(431, "", "the request's header fields exceed 64 KiB");
    }
    if (ec == bhttp::error::body_limit) {
      return SendServerError(413, std::string(parser_->get().target()),
                             fmt::format("request body exceeds the limit of {} bytes",
                                         shared_->options.max_body_bytes));
    }
    if (ec) {
      if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category()) {  // a malformed request
        return SendServerError(400, "", fmt::format("malformed HTTP request: {}", ec.message()));
      }
      return Close();
    }
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    HttpRequest r;
    r.method = std::string(req.method_string());
    std::string target(req.target());
    auto q = target.find('?');
    r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = target.substr(q + 1);
    for (auto& field : req) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      r.headers[name] = std::string(field.value());
    }
    r.body = std::move(req.body());
    r.remote = remote_;
    stream_.expires_never();
    if (shared_->draining->load()) {
      keep_alive_ = false;
      return SendServerError(503, r.path, "the server is shutting down");
    }
    state_ = State::kHandling;
    client_gone_ = false;
    header_written_ = false;
    end_requested_ = false;
    pending_.clear();
    shared_->in_flight->fetch_add(1);
    channel_ = std::make_shared<Channel>(shared_from_this());
    WatchClient();
    shared_->handler(std::move(r), channel_);
  }

  // Notices a client that goes away while its request is handled. Bytes that arrive meanwhile are a
  // pipelined request: they are read into the connection's buffer (where the next request's parse
  // starts) so that a later hang-up still shows. End of stream is a half-close, not a hang-up (the
  // client may still read the response): from then on a stream is probed with SSE comments, whose
  // writes fail once the client has really gone. A reset or a read error is a hang-up.
  void WatchClient() {
    uint64_t gen = ++watch_gen_;
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        net::bind_executor(stream_.get_executor(), [self = shared_from_this(), gen](error_code ec) {
          if (gen != self->watch_gen_ || !self->channel_) return;
          if (ec == net::error::operation_aborted) return;
          if (ec) return self->ClientGone();
          self->OnClientReadable(gen);
        }));
  }

  void OnClientReadable(uint64_t gen) {
    constexpr size_t kMaxBufferedPipeline = 1u << 20;
    const size_t room = kMaxBufferedPipeline > buffer_.size() ? kMaxBufferedPipeline - buffer_.size() : 0;
    if (room == 0) return;  // enough of the next request is buffered: stop watching until it is read
    auto space = buffer_.prepare(std::min<size_t>(room, 64 * 1024));
    ssize_t n = ::recv(stream_.socket().native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.commit(static_cast<size_t>(n));
      return WatchClient();
    }
    if (n == 0) {  // end of stream: a half-close, or a reset (recv reads 0 for both)
      if (PeerReset()) return ClientGone();
      read_closed_ = true;
      return Probe(gen);
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return WatchClient();  // stale readiness
    ClientGone();  // a reset or another error
  }

  // True when the connection was reset (TCP state CLOSED), as opposed to half-closed (CLOSE_WAIT).
  bool PeerReset() {
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (::getsockopt(stream_.socket().native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return true;
    return info.tcpi_state == TCP_CLOSE;
  }

  // After a half-close, every second: a reset since then is a hang-up; an idle stream gets an SSE
  // comment (a client that has closed its socket answers it with a reset, and the next write fails).
  void Probe(uint64_t gen) {
    probe_timer_.expires_after(std::chrono::seconds(1));
    probe_timer_.async_wait(net::bind_executor(stream_.get_executor(), [self = shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->watch_gen_ || !self->channel_ || self->client_gone_) return;
      if (self->PeerReset()) return self->ClientGone();
      if (self->state_ == State::kStreaming && self->header_written_ && !self->end_requested_ &&
          self->pending_.empty() && !self->writing_) {
        self->QueueChunk(":\n\n");
        self->Pump();
      }
      self->Probe(gen);
    }));
  }

  // The client is gone (or a write failed). Safe to call again: a stream whose end was requested
  // finishes once no write is pending, whichever of the watcher and the write noticed first.
  void ClientGone() {
    if (!client_gone_) {
      client_gone_ = true;
      keep_alive_ = false;
      pending_.clear();
      if (gone_callback_) {
        auto cb = std::move(gone_callback_);
        gone_callback_ = nullptr;
        cb();
      }
    }
    if (state_ == State::kStreaming && end_requested_ && !writing_) FinishResponse();
  }

  void Pump() {
    if (writing_ || !header_written_ || state_ != State::kStreaming) return;
    if (client_gone_) {
      if (end_requested_) FinishResponse();
      return;
    }
    if (!pending_.empty()) {
      inflight_ = std::move(pending_);
      pending_.clear();
    } else if (end_requested_) {
      inflight_ = "0\r\n\r\n";
      end_written_ = true;
    } else {
      return;
    }
    writing_ = true;
    stream_.expires_after(shared_->options.write_timeout);
    net::async_write(stream_, net::buffer(inflight_),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       self->writing_ = false;
                       if (ec) {
                         self->end_written_ = false;
                         self->ClientGone();
                         return;
                       }
                       if (self->end_written_) {
                         self->end_written_ = false;
                         return self->FinishResponse();
                       }
                       self->Pump();
                     });
  }

  void SendFull(HttpResponse response) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), 11);
    res->set(bhttp::field::server, "sparkserve");
    res->set(bhttp::field::content_type, response.content_type);
    for (auto& [k, v] : response.headers) res->set(k, v);
    res->keep_alive(keep_alive_ && !shared_->draining->load());
    if (!res->keep_alive()) keep_alive_ = false;
    res->body() = std::move(response.body);
    res->prepare_payload();
    stream_.expires_after(shared_->options.write_timeout);
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, std::size_t) {
      if (ec) self->keep_alive_ = false;
      self->FinishResponse();
    });
  }

  // A response the server makes itself (no handler involved): 400/413/503, then close.
  void SendServerError(int status, std::string_view path, const std::string& message) {
    keep_alive_ = false;
    state_ = State::kFullResponse;
    const auto& make = shared_->options.error_response;
    HttpResponse r = make ? make(status, std::string(path), message)
                          : DefaultErrorResponse(status, std::string(path), message);
    r.headers.emplace_back("Connection", "close");
    SendFull(std::move(r));
  }

  void FinishResponse() {
    ++watch_gen_;
    probe_timer_.cancel();
    if (channel_) {
      channel_.reset();
      shared_->in_flight->fetch_sub(1);
    }
    gone_callback_ = nullptr;
    serializer_.reset();
    stream_head_.reset();
    if (!keep_alive_ || client_gone_ || shared_->draining->load()) return Close();
    if (read_closed_ && buffer_.size() == 0) return Close();  // half-closed, nothing more to read
    DoRead();
  }

  void Close() {
    state_ = State::kReading;
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<HttpServer::Shared> shared_;
  std::string remote_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  std::shared_ptr<Channel> channel_;
  std::function<void()> gone_callback_;
  bool client_gone_ = false;
  bool read_closed_ = false;  // the client half-closed: it sends nothing more
  uint64_t watch_gen_ = 0;
  net::steady_timer probe_timer_;
  // Streaming state.
  std::unique_ptr<bhttp::response<bhttp::empty_body>> stream_head_;
  std::unique_ptr<bhttp::response_serializer<bhttp::empty_body>> serializer_;
  bool header_written_ = false;
  bool writing_ = false;
  bool end_requested_ = false;
  bool end_written_ = false;
  std::string pending_;   // framed chunks waiting for the current write
  std::string inflight_;  // the bytes being written
};

Channel::Channel(std::shared_ptr<Connection> conn) : conn_(std::move(conn)) {}

void Channel::Respond(HttpResponse response) {
  net::dispatch(conn_->executor(), [c = conn_, self = this, r = std::move(response)]() mutable {
    c->Respond(self, std::move(r));
  });
}
void Channel::StartStream(int status, std::string content_type,
                          std::vector<std::pair<std::string, std::string>> headers) {
  net::dispatch(conn_->executor(), [c = conn_, self = this, status, ct = std::move(content_type),
                                    h = std::move(headers)]() mutable {
    c->StartStream(self, status, std::move(ct), std::move(h));
  });
}
void Channel::Write(std::string chunk) {
  net::dispatch(conn_->executor(), [c = conn_, self = this, s = std::move(chunk)]() mutable {
    c->Write(self, std::move(s));
  });
}
void Channel::End() {
  net::dispatch(conn_->executor(), [c = conn_, self = this] { c->End(self); });
}
void Channel::OnClientGone(std::function<void()> callback) {
  net::dispatch(conn_->executor(), [c = conn_, self = this, cb = std::move(callback)]() mutable {
    c->SetGoneCallback(self, std::move(cb));
  });
}
net::any_io_executor Channel::executor() { return conn_->executor(); }

// Answers a connection past --max-connections: a fixed 503, then close (no request is read).
void Refuse(tcp::socket socket, const std::shared_ptr<HttpServer::Shared>& shared) {
  const auto& make = shared->options.error_response;
  const std::string message = fmt::format(
      "too many connections (the server's --max-connections is {}); retry later", shared->options.max_connections);
  HttpResponse r = make ? make(503, "", message) : DefaultErrorResponse(503, "", message);
  auto text = std::make_shared<std::string>(fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nServer: sparkserve\r\nContent-Type: {}\r\nContent-Length: {}\r\n"
      "Retry-After: 1\r\nConnection: close\r\n\r\n{}",
      r.content_type, r.body.size(), r.body));
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  net::async_write(*sock, net::buffer(*text), [sock, text](error_code, std::size_t) {
    error_code ec;
    sock->shutdown(tcp::socket::shutdown_send, ec);
    sock->close(ec);
  });
}

void DoAccept(std::shared_ptr<HttpServer::Shared> shared, net::io_context& ioc) {
  shared->acceptor.async_accept(net::make_strand(ioc), [shared, &ioc](error_code ec, tcp::socket socket) {
    if (!shared->acceptor.is_open()) return;
    if (!ec) {
      if (shared->connections.load() >= shared->options.max_connections) {
        Refuse(std::move(socket), shared);
      } else {
        std::make_shared<Connection>(std::move(socket), shared)->Run();
      }
      return DoAccept(shared, ioc);
    }
    if (ec == net::error::operation_aborted) return;
    if (ec == net::error::connection_aborted || ec == net::error::try_again || ec == net::error::interrupted) {
      return DoAccept(shared, ioc);  // that one client's problem
    }
    // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the pending connections stay
    // in the backlog; retrying at once would spin. Wait, log now and then, and try again.
    const auto now = std::chrono::steady_clock::now();
    ++shared->accept_errors_unlogged;
    if (now - shared->last_accept_log >= std::chrono::seconds(1)) {
      spdlog::warn("http: accept failed: {} ({} times since the last report); retrying in 100 ms", ec.message(),
                   shared->accept_errors_unlogged);
      shared->last_accept_log = now;
      shared->accept_errors_unlogged = 0;
    }
    auto timer = std::make_shared<net::steady_timer>(shared->acceptor.get_executor(), std::chrono::milliseconds(100));
    timer->async_wait([shared, &ioc, timer](error_code) { DoAccept(shared, ioc); });
  });
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, RequestHandler handler)
    : options_(std::move(options)),
      ioc_(std::max(1, options_.io_threads)),
      shared_(std::make_shared<Shared>(ioc_, options_, std::move(handler), &draining_, &in_flight_)) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  error_code ec;
  auto address = net::ip::make_address(options_.host, ec);
  if (ec) return absl::InvalidArgumentError(fmt::format("bad --host '{}': {}", options_.host, ec.message()));
  tcp::endpoint endpoint(address, options_.port);
  auto& acc = shared_->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec) acc.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(endpoint, ec);
  if (!ec) acc.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message()));
  }
  bound_port_ = acc.local_endpoint().port();
  DoAccept(shared_, ioc_);
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    threads_.emplace_back([this] {
      auto guard = net::make_work_guard(ioc_);
      ioc_.run();
    });
  }
  return absl::OkStatus();
}

void HttpServer::BeginDrain() { draining_.store(true); }

int64_t HttpServer::connections() const { return shared_->connections.load(); }

bool HttpServer::WaitDrained(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  net::post(shared_->acceptor.get_executor(), [shared = shared_] {
    error_code ec;
    shared->acceptor.close(ec);
  });
  ioc_.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace sparkserve::head::http
