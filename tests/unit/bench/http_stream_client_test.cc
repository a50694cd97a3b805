// bench/http_stream_client + serve_runner against a tiny scripted HTTP server on 127.0.0.1 that
// streams SSE with controlled delays, errors, stalls and early ends.
#include "bench/http_stream_client.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/serve_runner.h"
#include "boost/asio.hpp"
#include "gtest/gtest.h"

namespace sparkserve::bench {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Accepts connections on an ephemeral loopback port; each is served on its own thread by
// `handler(socket, request_text)`.
class ScriptedServer {
 public:
  using Handler = std::function<void(tcp::socket&, const std::string& request, const std::atomic<bool>& stop)>;
  explicit ScriptedServer(Handler h) : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), handler_(std::move(h)) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    boost::system::error_code ec;
    // Wake accept() with a connection of our own.
    tcp::socket s(io_);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    accept_thread_.join();
    for (auto& t : conn_threads_) t.join();
  }
  HttpTarget target() const { return {"127.0.0.1", std::to_string(port_), ""}; }
  int connections() const { return connections_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      auto sock = std::make_shared<tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*sock, ec);
      if (ec || stop_) return;
      ++connections_;
      conn_threads_.emplace_back([this, sock] {
        std::string req;
        char buf[4096];
        boost::system::error_code rec;
        while (true) {  // headers, then Content-Length bytes of body
          const size_t n = sock->read_some(asio::buffer(buf), rec);
          if (rec) return;
          req.append(buf, n);
          const size_t end = req.find("\r\n\r\n");
          if (end == std::string::npos) continue;
          size_t len = 0;
          const size_t cl = req.find("Content-Length: ");
          if (cl != std::string::npos) len = std::stoul(req.substr(cl + 16));
          if (req.size() >= end + 4 + len) break;
        }
        handler_(*sock, req, stop_);
        sock->shutdown(tcp::socket::shutdown_both, rec);
      });
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  Handler handler_;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  std::vector<std::thread> conn_threads_;
};

void Write(tcp::socket& s, const std::string& text) {
  boost::system::error_code ec;
  asio::write(s, asio::buffer(text), ec);
}
void Chunk(tcp::socket& s, const std::string& data) {
  char len[32];
  std::snprintf(len, sizeof len, "%zx\r\n", data.size());
  Write(s, std::string(len) + data + "\r\n");
}
const char* kSseHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

// Three token chunks 50 ms apart after a 100 ms "prefill", then usage and [DONE].
void StreamThreeTokens(tcp::socket& s, const std::string&, const std::atomic<bool>&) {
  Write(s, kSseHeader);
  std::this_thread::sleep_for(100ms);
  for (const char* t : {"a", "b", "c"}) {
    Chunk(s, std::string("data: {\"choices\":[{\"text\":\"") + t + "\"}]}\n\n");
    std::this_thread::sleep_for(50ms);
  }
  Chunk(s, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n");
  Write(s, "0\r\n\r\n");
}

ServeRunOptions Options(const HttpTarget& t) {
  ServeRunOptions o;
  o.target = t;
  o.model = "m";
  o.progress = false;
  o.request_timeout_s = 5;
  return o;
}

std::vector<BenchPrompt> Prompts(int n) { return std::vector<BenchPrompt>(static_cast<size_t>(n), {"hi there", 2, 3}); }

TEST(HttpStreamClientTest, ParseHttpUrl) {
  auto t = ParseHttpUrl("http://127.0.0.1:8123/api/");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, "8123");
  EXPECT_EQ(t->base_path, "/api");
  auto v6 = ParseHttpUrl("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9000");
  EXPECT_EQ(ParseHttpUrl("http://localhost")->port, "80");
  EXPECT_NE(std::string(ParseHttpUrl("https://x").status().message()).find("https is not supported"),
            std::string::npos);
  EXPECT_FALSE(ParseHttpUrl("localhost:80").ok());
  EXPECT_FALSE(ParseHttpUrl("http://host:abc").ok());
}

TEST(HttpStreamClientTest, StreamsChunksWithTimestampsConcurrently) {
  ScriptedServer server(StreamThreeTokens);
  const auto t0 = Clock::now();
  const ServeRunResult r = RunServeBenchmark(Prompts(4), Options(server.target()), nullptr);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.outcomes.size(), 4u);
  for (const RequestOutcome& o : r.outcomes) {
    EXPECT_TRUE(o.success) << o.error;
    EXPECT_EQ(o.output_tokens, 3);
    EXPECT_EQ(o.output_token_source, "usage");
    EXPECT_EQ(o.generated_text, "abc");
    EXPECT_GE(o.ttft, 0.09);
    ASSERT_EQ(o.itl.size(), 2u);
    for (double g : o.itl) EXPECT_GE(g, 0.04);
    EXPECT_NEAR(o.latency, o.ttft + o.itl[0] + o.itl[1], 1e-9);
  }
  EXPECT_EQ(server.connections(), 4);
  // Four 250 ms streams at once (unlimited concurrency) take far less than 4 x 250 ms.
  EXPECT_LT(wall, 0.8);
  EXPECT_GE(r.duration_s, 0.2);
}

TEST(HttpStreamClientTest, MaxConcurrencyOneSerialises) {
  ScriptedServer server(StreamThreeTokens);
  ServeRunOptions opts = Options(server.target());
  opts.max_concurrency = 1;
  const ServeRunResult r = RunServeBenchmark(Prompts(3), opts, nullptr);
  ASSERT_EQ(r.outcomes.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_GE(r.outcomes[i].start_time, r.outcomes[i - 1].start_time + r.outcomes[i - 1].latency - 1e-3);
  }
  EXPECT_GE(r.duration_s, 0.7);
}

TEST(HttpStreamClientTest, RefusedConnectionFailsWithItsMessage) {
  unsigned short port = 0;
  {
    asio::io_context io;
    tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  const ServeRunResult r =
      RunServeBenchmark(Prompts(2), Options({"127.0.0.1", std::to_string(port), ""}), nullptr);
  ASSERT_EQ(r.outcomes.size(), 2u);
  for (const auto& o : r.outcomes) {
    EXPECT_FALSE(o.success);
    EXPECT_NE(o.error.find("connect: Connection refused"), std::string::npos) << o.error;
  }
}

TEST(HttpStreamClientTest, HttpErrorKeepsStatusAndBody) {
  ScriptedServer server([](tcp::socket& s, const std::string&, const std::atomic<bool>&) {
    Write(s, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom");
  });
  const ServeRunResult r = RunServeBenchmark(Prompts(1), Options(server.target()), nullptr);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_FALSE(r.outcomes[0].success);
  EXPECT_EQ(r.outcomes[0].error, "HTTP 500: boom");
}

TEST(HttpStreamClientTest, StalledServerTimesOutWithoutHangingTheRun) {
  ScriptedServer server([](tcp::socket& s, const std::string&, const std::atomic<bool>& stop) {
    Write(s, kSseHeader);
    Chunk(s, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
    for (int i = 0; i < 30 && !stop; ++i) std::this_thread::sleep_for(50ms);  // stall
  });
  ServeRunOptions opts = Options(server.target());
  opts.request_timeout_s = 0.3;
  const auto t0 = Clock::now();
  const ServeRunResult r = RunServeBenchmark(Prompts(2), opts, nullptr);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  for (const auto& o : r.outcomes) {
    EXPECT_FALSE(o.success);
    EXPECT_EQ(o.error, "request timed out after 0.3 s");
  }
}

TEST(HttpStreamClientTest, StreamEndingEarlyIsAFailure) {
  // Chunked body cut off mid-stream.
  ScriptedServer cut([](tcp::socket& s, const std::string&, const std::atomic<bool>&) {
    Write(s, kSseHeader);
    Chunk(s, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
  });
  const ServeRunResult r1 = RunServeBenchmark(Prompts(1), Options(cut.target()), nullptr);
  EXPECT_FALSE(r1.outcomes.at(0).success);
  EXPECT_NE(r1.outcomes[0].error.find("connection closed before the response body ended"), std::string::npos)
      << r1.outcomes[0].error;
  // A well-formed body that never sends [DONE].
  ScriptedServer no_done([](tcp::socket& s, const std::string&, const std::atomic<bool>&) {
    Write(s, kSseHeader);
    Chunk(s, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n");
    Write(s, "0\r\n\r\n");
  });
  const ServeRunResult r2 = RunServeBenchmark(Prompts(1), Options(no_done.target()), nullptr);
  EXPECT_FALSE(r2.outcomes.at(0).success);
  EXPECT_EQ(r2.outcomes[0].error, "stream ended before data: [DONE]");
}

TEST(HttpStreamClientTest, WithoutUsageCountsByTokenizerOrChunks) {
  ScriptedServer server([](tcp::socket& s, const std::string&, const std::atomic<bool>&) {
    Write(s, kSseHeader);
    Chunk(s, "data: {\"choices\":[{\"text\":\"one two\"}]}\n\ndata: {\"choices\":[{\"text\":\" three\"}]}\n\n");
    Chunk(s, "data: [DONE]\n\n");
    Write(s, "0\r\n\r\n");
  });
  const ServeRunResult chunks = RunServeBenchmark(Prompts(1), Options(server.target()), nullptr);
  ASSERT_TRUE(chunks.outcomes.at(0).success) << chunks.outcomes[0].error;
  EXPECT_EQ(chunks.outcomes[0].output_tokens, 2);
  EXPECT_EQ(chunks.outcomes[0].output_token_source, "chunks");
  const OutputTokenCounter words = [](const std::string& text) {
    return static_cast<int>(std::count(text.begin(), text.end(), ' ') + 1);
  };
  const ServeRunResult tok = RunServeBenchmark(Prompts(1), Options(server.target()), words);
  EXPECT_EQ(tok.outcomes.at(0).output_tokens, 3);
  EXPECT_EQ(tok.outcomes[0].output_token_source, "tokenizer");
}

TEST(HttpStreamClientTest, RequestBodyAsVllmSendsIt) {
  ServeRunOptions o;
  o.model = "m";
  o.ignore_eos = true;
  const std::string c = BuildRequestBody(o, {"hello", 1, 7});
  EXPECT_NE(c.find(R"("prompt":"hello")"), std::string::npos) << c;
  EXPECT_NE(c.find(R"("max_tokens":7)"), std::string::npos) << c;
  EXPECT_NE(c.find(R"("stream_options":{"include_usage":true})"), std::string::npos) << c;
  EXPECT_NE(c.find(R"("ignore_eos":true)"), std::string::npos) << c;
  o.endpoint = "/v1/chat/completions";
  o.ignore_eos = false;
  const std::string chat = BuildRequestBody(o, {"hello", 1, 7});
  EXPECT_NE(chat.find(R"("messages":[{"content":"hello","role":"user"}])"), std::string::npos) << chat;
  EXPECT_EQ(chat.find("ignore_eos"), std::string::npos) << chat;
}

}  // namespace
}  // namespace sparkserve::bench
