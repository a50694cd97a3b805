// ApiServerTest: the fixture of the in-process HTTP tests: a real HttpServer on loopback with
// ApiServer, a fake codec and a fake engine replaying token ids.
#pragma once
#include <algorithm>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "head/http/api_server.h"
#include "head/http/http_server.h"
#include "head/http/model_output_parser.h"
#include "head/http/tool_choice.h"
#include "tests/unit/http/fakes.h"
#include "text/constraint/grammar_compiler.h"
#include "text/constraint/token_vocabulary.h"
#include "tests/unit/http/http_test_client.h"

namespace sparkserve::head::http::testing {

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(""); }
  // The server stops first (no new requests), then the render workers finish (their tasks hold
  // channels, which must not outlive the server), then the replay threads (they post into the
  // server's io_context, stopped but alive until server_ goes).
  void TearDown() override {
    server_->Stop();
    api_->Join();
    engine_.JoinAll();
  }

  void StartServer(const std::string& api_key) {
    if (server_) server_->Stop();
    ctx_.engine = &engine_;
    ctx_.codec = &codec_;
    ctx_.parser_factory = MakeModelPieceParserFactory(family_);
    ctx_.tool_call_markup = ToolCallMarkupFor(family_);
    ctx_.model_name = "tiny";
    ctx_.max_seq_len = max_seq_len_;
    ctx_.default_sampling.temperature = 0.0f;
    ctx_.api_key = api_key;
    ctx_.ready = &ready_;
    ctx_.grammars = FakeGrammars(codec_);
    api_ = std::make_unique<ApiServer>(ctx_, &metrics_);
    HttpServerOptions opts;
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.max_body_bytes = max_body_bytes_;
    opts.error_response = &ApiServer::TransportError;
    server_ = std::make_unique<HttpServer>(opts, [this](HttpRequest r, std::shared_ptr<ResponseChannel> c) {
      api_->Handle(std::move(r), std::move(c));
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  ClientReply Post(const std::string& path, const Json& body, const std::map<std::string, std::string>& h = {}) {
    TestClient c(server_->port());
    return c.Send("POST", path, body.dump(), h);
  }
  ClientReply Get(const std::string& path, const std::map<std::string, std::string>& h = {}) {
    TestClient c(server_->port());
    return c.Send("GET", path, "", h);
  }

  // Structured outputs over the fake codec's vocabulary (its added tokens keep their text, as
  // TokenVocabulary::FromTokenizer keeps non-special added tokens; <|im_end|> has none).
  static std::shared_ptr<text::constraint::GrammarCompiler> FakeGrammars(const FakeCodec& codec) {
    std::vector<std::string> bytes;
    for (int32_t id = 0; id < codec.vocab_size(); ++id) {
      bytes.push_back(id == FakeCodec::kImEnd ? "" : codec.Piece(id, /*skip_special=*/false));
    }
    return std::make_shared<text::constraint::GrammarCompiler>(
        text::constraint::TokenVocabulary::Create(std::move(bytes), codec.vocab_size()));
  }

  // The decoded text of `text` minus reasoning/tool-call markup (what clients must get back).
  static std::string WithoutThinkMarkup(std::string s) {
    for (const std::string tag : {"<think>", "</think>"}) {
      for (size_t p; (p = s.find(tag)) != std::string::npos;) s.erase(p, tag.size());
    }
    return s;
  }

  text::ModelFamily family_ = text::ModelFamily::kQwen3_5;
  uint64_t max_body_bytes_ = 64 * 1024;  // tests may change these, then StartServer("")
  int32_t max_seq_len_ = 512;
  FakeCodec codec_;
  FakeEngine engine_{&codec_};
  std::atomic<bool> ready_{true};
  ServingContext ctx_;
  ServingMetrics metrics_{"tiny"};
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpServer> server_;
};

inline const Json kUser = Json::array({{{"role", "user"}, {"content", "hi"}}});


// Error bodies in each API's own shape, containing `needle`.
inline void ExpectOpenAiError(const ClientReply& r, int status, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body);
  ASSERT_TRUE(j.contains("error")) << r.body;
  for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << k;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

inline void ExpectAnthropicError(const ClientReply& r, int status, const std::string& type, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], type);
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

}  // namespace sparkserve::head::http::testing
