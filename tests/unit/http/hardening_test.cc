// Hostile and broken clients against the HTTP layer (issue 25): deep JSON, numbers out of range,
// wrongly typed fields, max_tokens overflow, oversized stop lists, slow templates on the I/O
// threads, clients that half-close, pipeline or vanish while a write is pending, and streams that
// the server ends itself at shutdown. Each test failed before its fix.
#include <sys/socket.h>

#include <future>
#include <limits>

#include "tests/unit/http/api_server_fixture.h"

namespace sparkserve::head::http {
namespace {

using testing::ApiServerTest;
using testing::ClientReply;
using testing::ExpectAnthropicError;
using testing::ExpectOpenAiError;
using testing::kUser;
using testing::ParseSse;
using testing::TestClient;
namespace bhttp = boost::beast::http;

// Under ThreadSanitizer (deploy/sanitize.sh tsan) everything runs 5-15x slower.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A request body with `raw` spliced in as the value of `key` (raw JSON text, unparsed here).
std::string WithRaw(const Json& body, const std::string& key, const std::string& raw) {
  std::string s = body.dump();
  s.pop_back();
  return s + ",\"" + key + "\":" + raw + "}";
}

ClientReply PostRaw(uint16_t port, const std::string& path, const std::string& body) {
  TestClient c(port);
  return c.Send("POST", path, body);
}

class HardeningTest : public ApiServerTest {
 protected:
  void SetUp() override {
    max_body_bytes_ = 4u << 20;
    ApiServerTest::SetUp();
  }
};

TEST_F(HardeningTest, DeeplyNestedJsonIsA400NamingTheLimitInEveryApi) {
  const std::string deep = Nested(200000);
  // The reproduction from the issue: chat_template_kwargs holding 200,000 nested '['.
  ExpectOpenAiError(PostRaw(server_->port(), "/v1/chat/completions",
                            WithRaw(Json{{"messages", kUser}}, "chat_template_kwargs", "{\"x\":" + deep + "}")),
                    400, "nested deeper than 64");
  ExpectOpenAiError(PostRaw(server_->port(), "/v1/chat/completions", WithRaw(Json{{"messages", kUser}}, "tools", deep)),
                    400, "64");
  ExpectOpenAiError(PostRaw(server_->port(), "/tokenize", WithRaw(Json{{"messages", kUser}}, "chat_template_kwargs",
                                                                  "{\"x\":" + deep + "}")),
                    400, "64");
  ExpectAnthropicError(PostRaw(server_->port(), "/v1/messages",
                               WithRaw(Json{{"max_tokens", 3}, {"messages", kUser}}, "temperature", deep)),
                       400, "invalid_request_error", "64");
  // Tool-call arguments given as a JSON string are parsed with the same bound.
  Json msgs = Json::array({{{"role", "user"}, {"content", "hi"}},
                           {{"role", "assistant"},
                            {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                             {"function", {{"name", "f"}, {"arguments", "{\"a\":" + deep + "}"}}}}}}}});
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", msgs}}), 400, "64");
  // 64 levels are fine.
  engine_.SetOutputs({"ok"});
  EXPECT_EQ(PostRaw(server_->port(), "/v1/chat/completions",
                    WithRaw(Json{{"messages", kUser}}, "chat_template_kwargs", "{\"x\":" + Nested(60) + "}"))
                .status,
            200);
  EXPECT_EQ(Get("/health").status, 200);  // still alive
}

TEST_F(HardeningTest, NumbersOutOfRangeAre400s) {
  ExpectOpenAiError(PostRaw(server_->port(), "/v1/chat/completions", WithRaw(Json{{"messages", kUser}}, "temperature", "1e400")),
                    400, "out of range");
  Json msgs = Json::array({{{"role", "user"}, {"content", "hi"}},
                           {{"role", "assistant"},
                            {"tool_calls", {{{"id", "c1"}, {"type", "function"},
                                             {"function", {{"name", "f"}, {"arguments", "{\"x\": 1e400}"}}}}}}}});
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", msgs}}), 400, "arguments");
  ExpectAnthropicError(PostRaw(server_->port(), "/v1/messages",
                               WithRaw(Json{{"max_tokens", 3}, {"messages", kUser}}, "top_k", "-1e999")),
                       400, "invalid_request_error", "out of range");
}

// Structured-output fields carry their own languages (regex, GBNF, JSON schema as text): nesting and
// size are bounded there too. 100,000 '(' in guided_regex or guided_grammar overflowed the stack of
// the recursive-descent parsers before the bound.
TEST_F(HardeningTest, StructuredOutputSourcesAreBoundedInDepthAndSize) {
  const std::string open(100000, '('), close(100000, ')');
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"guided_regex", open + "a" + close}}), 400,
                    "nested deeper than 64");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", "x"}, {"guided_grammar", "root ::= " + open + "\"a\"" + close}}),
                    400, "nested deeper than 64");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"guided_json", "{\"a\":" + Nested(100000) + "}"}}),
                    400, "nested deeper than 64");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"guided_regex", std::string(300000, 'a')}}),
                    400, "bytes a constraint may have");
  std::vector<std::string> choices(40000, "choice");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"guided_choice", choices}}), 400,
                    "bytes a constraint may have");
  EXPECT_TRUE(engine_.submitted.empty());
  EXPECT_EQ(Get("/health").status, 200);
}

TEST_F(HardeningTest, WronglyTypedIdAndTypeFieldsAre400s) {
  auto assistant_call = [](Json id) {
    return Json::array({{{"role", "user"}, {"content", "hi"}},
                        {{"role", "assistant"},
                         {"tool_calls", {{{"id", id}, {"type", "function"},
                                          {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}});
  };
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", assistant_call(5)}}), 400, "id");
  ExpectOpenAiError(Post("/v1/chat/completions",
                         Json{{"messages", kUser}, {"tools", {{{"type", 5}, {"function", {{"name", "f"}}}}}}}),
                    400, "type");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", {{{"role", "user"}, {"content", {{{"type", 7}}}}}}}}),
                    400, "type");
  Json anth = {{"max_tokens", 3}};
  anth["messages"] = {{{"role", "user"}, {"content", {{{"type", 5}, {"text", "x"}}}}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "type");
  anth["messages"] = {{{"role", "user"}, {"content", "q"}},
                      {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", 9}, {"name", "f"}, {"input", Json::object()}}}}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "id");
  anth["messages"] = {{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", {1, 2}}, {"content", "r"}}}}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "tool_use_id");
  anth["messages"] = kUser;
  anth["system"] = {{{"type", false}, {"text", "s"}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "type");
  EXPECT_EQ(Get("/health").status, 200);
}

TEST_F(HardeningTest, ToolSchemasAreValidated) {
  auto tool = [](Json fn) { return Json::array({{{"type", "function"}, {"function", fn}}}); };
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"tools", tool({{"name", "f"}, {"parameters", "x"}})}}),
                    400, "parameters");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"tools", tool({{"name", ""}})}}), 400, "name");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"tools", tool({{"name", "a b<"}})}}), 400, "name");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"tools", tool({{"name", "f"}, {"description", 3}})}}),
                    400, "description");
  ExpectOpenAiError(Post("/v1/chat/completions",
                         Json{{"messages", kUser}, {"tools", tool({{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", 5}}}})}}),
                    400, "properties");
  Json anth = {{"max_tokens", 3}, {"messages", kUser}};
  anth["tools"] = {{{"name", "f"}, {"input_schema", "nope"}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "input_schema");
  anth["tools"] = {{{"name", "f"}, {"input_schema", {{"type", "string"}}}}};
  ExpectAnthropicError(Post("/v1/messages", anth), 400, "invalid_request_error", "input_schema");
  // A valid schema still works.
  engine_.SetOutputs({"ok"});
  EXPECT_EQ(Post("/v1/chat/completions",
                 Json{{"messages", kUser},
                      {"tools", tool({{"name", "get_weather"}, {"description", "d"},
                                      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}})}})
                .status,
            200);
}

TEST_F(HardeningTest, HugeMaxTokensIsA400NamingMaxTokensAndTheContext) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  ClientReply r = Post("/v1/chat/completions", Json{{"messages", kUser}, {"max_tokens", huge}});
  ExpectOpenAiError(r, 400, "maximum context length is 512");
  EXPECT_EQ(r.json()["error"]["param"], "max_tokens");
  r = Post("/v1/chat/completions", Json{{"messages", kUser}, {"max_completion_tokens", huge - 3}});
  ExpectOpenAiError(r, 400, "maximum context length is 512");
  EXPECT_EQ(r.json()["error"]["param"], "max_completion_tokens");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", "x"}, {"max_tokens", huge}}), 400, "maximum context length");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", huge}, {"messages", kUser}}), 400,
                       "invalid_request_error", "max_tokens");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", huge}, {"messages", kUser}}), 400,
                       "invalid_request_error", "512");
  EXPECT_TRUE(engine_.submitted.empty());
}

TEST_F(HardeningTest, StopListsAreBoundedInCountAndLength) {
  std::vector<std::string> many;
  for (int i = 0; i < 17; ++i) many.push_back("s" + std::to_string(i));
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"stop", many}}), 400, "at most 16");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", "x"}, {"stop", std::string(5000, 'z')}}), 400, "bytes");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", 3}, {"messages", kUser}, {"stop_sequences", many}}), 400,
                       "invalid_request_error", "stop_sequences");
  EXPECT_TRUE(engine_.submitted.empty());
  // 16 stops of 256 bytes are fine, and n samples share them.
  many.resize(16);
  many[0] = std::string(256, 'q');
  engine_.SetOutputs({"abc"});
  EXPECT_EQ(Post("/v1/chat/completions", Json{{"messages", kUser}, {"stop", many}, {"n", 4}}).status, 200);
}

TEST_F(HardeningTest, SlowTemplatesDoNotStallTheIoThreads) {
  // Two renders that block (the fixture's server has two I/O threads), then /health must answer.
  std::vector<std::thread> slow;
  std::vector<int> statuses(2, 0);
  engine_.SetOutputs({"ok"});
  for (int i = 0; i < 2; ++i) {
    slow.emplace_back([this, i, &statuses] {
      statuses[i] = Post("/v1/chat/completions", Json{{"messages", {{{"role", "user"}, {"content", "BLOCK"}}}}}).status;
    });
  }
  for (int i = 0; i < 2000 && codec_.blocked_renders() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto health = std::async(std::launch::async, [this] { return Get("/health").status; });
  const bool answered = health.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  codec_.Unblock();
  for (auto& t : slow) t.join();
  EXPECT_TRUE(answered) << "/health waited behind template rendering";
  EXPECT_EQ(health.get(), 200);
  EXPECT_EQ(statuses, (std::vector<int>{200, 200}));
}

// A client that half-closes (shutdown(SHUT_WR)) after its request still gets the whole response.
TEST_F(HardeningTest, HalfCloseIsNotADisconnect) {
  engine_.SetDelay(std::chrono::milliseconds(2));
  engine_.SetOutputs({std::string(40, 'h')});
  for (bool stream : {false, true}) {
    TestClient c(server_->port());
    bhttp::request<bhttp::string_body> req(bhttp::verb::post, "/v1/chat/completions", 11);
    req.set(bhttp::field::host, "x");
    req.body() = Json{{"messages", kUser}, {"stream", stream}}.dump();
    req.prepare_payload();
    bhttp::write(c.socket(), req);
    c.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send);
    boost::beast::flat_buffer buf;
    bhttp::response<bhttp::string_body> res;
    boost::system::error_code ec;
    bhttp::read(c.socket(), buf, res, ec);
    ASSERT_FALSE(ec) << ec.message() << " (stream=" << stream << ")";
    EXPECT_EQ(res.result_int(), 200u);
    EXPECT_NE(res.body().find(std::string(stream ? "h" : std::string(40, 'h'))), std::string::npos);
    if (stream) {
      EXPECT_NE(res.body().find("data: [DONE]"), std::string::npos);
    }
  }
  EXPECT_EQ(engine_.cancels.load(), 0);
}

// Pipelined requests are answered in order; bytes of the next request are not a disconnect, and a
// client that vanishes after pipelining is still noticed.
TEST_F(HardeningTest, PipelinedBytesAreNotADisconnect) {
  engine_.SetDelay(std::chrono::milliseconds(2));
  engine_.SetOutputs({std::string(30, 'p')});
  {
    TestClient c(server_->port());
    std::string wire;
    for (int i = 0; i < 2; ++i) {
      std::string body = Json{{"messages", kUser}, {"stream", i == 0}}.dump();
      wire += "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body;
    }
    boost::asio::write(c.socket(), boost::asio::buffer(wire));
    boost::beast::flat_buffer buf;
    for (int i = 0; i < 2; ++i) {
      bhttp::response<bhttp::string_body> res;
      bhttp::read(c.socket(), buf, res);
      EXPECT_EQ(res.result_int(), 200u);
      EXPECT_NE(res.body().find(i == 0 ? "\"content\":\"p\"" : "ppp"), std::string::npos) << res.body();
    }
    EXPECT_EQ(engine_.cancels.load(), 0);
  }
  // A request, then (while it runs) the start of the next one, then a reset: still noticed, and
  // the first request is cancelled although no response byte was written yet.
  engine_.SetDelay(std::chrono::milliseconds(5));
  engine_.SetOutputs({std::string(2000, 'q')});
  {
    TestClient c(server_->port());
    std::string body = Json{{"messages", kUser}}.dump();
    std::string wire = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body;
    boost::asio::write(c.socket(), boost::asio::buffer(wire));
    for (int i = 0; i < 2000 && engine_.running() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    boost::asio::write(c.socket(), boost::asio::buffer(std::string("GET /health HTTP/1.1\r\n")));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.socket().set_option(boost::asio::socket_base::linger(true, 0));
    c.socket().close();  // a reset (asio's destructor would turn linger off and send a FIN)
  }
  for (int i = 0; i < 400 && (engine_.running() > 0 || server_->in_flight() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(engine_.cancels.load(), 1);
  EXPECT_EQ(server_->in_flight(), 0);
}

// The stream's end is requested while a write is stuck on a client that stopped reading, then the
// client goes away: the response must still finish (in-flight count, socket, connection freed).
TEST_F(HardeningTest, StreamEndingWhileAWriteIsPendingAndTheClientLeavesIsReleased) {
  max_seq_len_ = 200000;
  StartServer("");
  engine_.SetOutputs({std::string(120000, 'w')});
  // Under TSan formatting the 120000 queued events takes ~20 s a round: one round, with a wait
  // that no longer tells the fix apart from the 60 s write timeout (the plain build does that);
  // the run is there for the races.
  const int rounds = kTsan ? 1 : 3, waits = kTsan ? 4500 : 1000;
  for (int round = 0; round < rounds; ++round) {
    {
      TestClient c(server_->port());
      bhttp::request<bhttp::string_body> req(bhttp::verb::post, "/v1/chat/completions", 11);
      req.set(bhttp::field::host, "x");
      req.body() = Json{{"messages", kUser}, {"stream", true}}.dump();
      req.prepare_payload();
      bhttp::write(c.socket(), req);
      char b[64];
      c.socket().read_some(boost::asio::buffer(b));
      // Stop reading: the engine finishes (End requested) while the server's write is blocked.
      for (int i = 0; i < 3000 && engine_.running() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }  // closed with unread data: a reset
    engine_.JoinAll();
    // The connection's strand still formats the queued tokens (seconds on a loaded machine) before
    // it sees the reset; without the fix the count stays at 1 for the whole write timeout (60 s).
    for (int i = 0; i < waits && server_->in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(server_->in_flight(), 0) << "round " << round;
  }
}

// At the drain timeout the engine aborts what is left: streams end with an error event (and
// [DONE] for OpenAI) instead of looking like a normal end.
TEST_F(HardeningTest, StreamsAbortedByShutdownEndWithAnErrorEvent) {
  engine_.SetDelay(std::chrono::milliseconds(5));
  engine_.SetOutputs({std::string(2000, 'x')});
  std::string openai, anthropic;
  std::thread a([&] { openai = Post("/v1/chat/completions", Json{{"messages", kUser}, {"stream", true}}).body; });
  std::thread b([&] {
    anthropic = Post("/v1/messages", Json{{"max_tokens", 400}, {"messages", kUser}, {"stream", true}}).body;
  });
  for (int i = 0; i < 2000 && engine_.running() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  engine_.AbortAll();
  a.join();
  b.join();
  auto events = ParseSse(openai);
  ASSERT_GE(events.size(), 2u) << openai;
  EXPECT_EQ(events.back().data, "[DONE]");
  Json err = Json::parse(events[events.size() - 2].data);
  ASSERT_TRUE(err.contains("error")) << openai;
  EXPECT_NE(err["error"]["message"].get<std::string>().find("shutting down"), std::string::npos) << openai;
  auto aevents = ParseSse(anthropic);
  ASSERT_FALSE(aevents.empty());
  EXPECT_EQ(aevents.back().event, "error") << anthropic;
  EXPECT_NE(aevents.back().data.find("shutting down"), std::string::npos) << anthropic;
}

// /metrics may be scraped while `serve` publishes the engine (run under TSan to see the race).
TEST_F(HardeningTest, MetricsDuringStartupSeeTheEngineOnlyOnceReady) {
  ready_ = false;
  ctx_.engine = nullptr;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) EXPECT_EQ(Get("/metrics").status, 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ctx_.engine = &engine_;
  ready_ = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  scraper.join();
  EXPECT_NE(Get("/metrics").body.find("sparkserve:engine_steps_total{model_name=\"tiny\"} 7"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::head::http
