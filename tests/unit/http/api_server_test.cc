// The HTTP layer end to end in-process: a real HttpServer on loopback with ApiServer, a fake codec
// and a fake engine replaying token ids (reasoning and tool-call flows a random model cannot make).
#include "tests/unit/http/api_server_fixture.h"

namespace sparkserve::head::http {
namespace {

using testing::ApiServerTest;
using testing::ClientReply;
using testing::FakeCodec;
using testing::FakeEngine;
using testing::kUser;
using testing::ParseSse;
using testing::ExpectAnthropicError;
using testing::ExpectOpenAiError;
using testing::TestClient;

TEST_F(ApiServerTest, ChatSplitsReasoningAndContentKeepingEveryByte) {
  const std::string out = "\n plan it \xE2\x9C\x93</think>\n\n  Hello \xEF\xBF\xBD world \n";
  engine_.SetOutputs({out + "<|im_end|>"});
  Json req = {{"model", "tiny"}, {"messages", kUser}, {"chat_template_kwargs", {{"enable_thinking", true}}},
              {"unknown_field", 1}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], "\n plan it \xE2\x9C\x93");
  EXPECT_EQ(msg["content"], "\n\n  Hello \xEF\xBF\xBD world \n");
  EXPECT_EQ(msg["reasoning_content"].get<std::string>() + msg["content"].get<std::string>(), WithoutThinkMarkup(out));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // usage: the prompt as the template rendered it, every generated id (the end token too).
  auto prompt = codec_.RenderChat(codec_.last_messages, nullptr, true, false, {{"enable_thinking", true}});
  EXPECT_EQ(j["usage"]["prompt_tokens"], codec_.Encode(*prompt, false)->size());
  EXPECT_EQ(j["usage"]["completion_tokens"], codec_.Encode(out + "<|im_end|>", false)->size());
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
  ASSERT_EQ(engine_.submitted.size(), 1u);
  EXPECT_EQ(engine_.submitted[0].prompt_ids, *codec_.Encode(*prompt, false));
  EXPECT_EQ(engine_.submitted[0].max_tokens, 512 - static_cast<int>(engine_.submitted[0].prompt_ids.size()));
}

TEST_F(ApiServerTest, ChatStreamDeltasConcatenateToTheOutputAndEndWithUsage) {
  const std::string out = "think\xC3\xA9</think>ans\xC3\xA9r ";
  engine_.SetOutputs({out});
  Json req = {{"messages", kUser}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
              {"chat_template_kwargs", {{"enable_thinking", true}}}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  auto events = ParseSse(r.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back().data, "[DONE]");
  std::string reasoning, content;
  Json first = Json::parse(events[0].data);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    Json c = Json::parse(events[i].data);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(reasoning, "think\xC3\xA9");
  EXPECT_EQ(content, "ans\xC3\xA9r ");
  EXPECT_EQ(finish, "stop");
  Json usage_chunk = Json::parse(events[events.size() - 2].data);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], codec_.Encode(out, false)->size());
}

TEST_F(ApiServerTest, ChatToolCallsNonStreamingAndStreaming) {
  const std::string call =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n</function>\n</tool_call>";
  engine_.SetOutputs({"Let me check.\n" + call});
  Json tools = Json::array({{{"type", "function"},
                             {"function", {{"name", "get_weather"},
                                           {"parameters", {{"type", "object"},
                                                           {"properties", {{"city", {{"type", "string"}}},
                                                                           {"days", {{"type", "integer"}}}}}}}}}}});
  Json req = {{"messages", kUser}, {"tools", tools}, {"tool_choice", "auto"}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["content"], "Let me check.\n");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            Json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(codec_.last_tools, tools);

  req["stream"] = true;
  r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200);
  std::string name, args, id, content, finish;
  for (const auto& e : ParseSse(r.body)) {
    if (e.data == "[DONE]") continue;
    Json c = Json::parse(e.data);
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      EXPECT_EQ(d["tool_calls"][0]["index"], 0);
      const Json& fn = d["tool_calls"][0]["function"];
      if (fn.contains("name")) name += fn["name"].get<std::string>();
      if (fn.contains("arguments")) args += fn["arguments"].get<std::string>();
      if (d["tool_calls"][0].contains("id")) id = d["tool_calls"][0]["id"];
    }
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Let me check.\n");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(Json::parse(args), Json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(finish, "tool_calls");

  // tool_choice none: the markup stays content.
  req["stream"] = false;
  req["tool_choice"] = "none";
  r = Post("/v1/chat/completions", req);
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "Let me check.\n" + call);
}

TEST_F(ApiServerTest, StopStringsAreWithheldAndStopTheEngine) {
  engine_.SetDelay(std::chrono::milliseconds(1));
  engine_.SetOutputs({"abc ST" "OP and then a lot more text that should never be generated"});
  Json req = {{"messages", kUser}, {"stop", Json::array({"STOP", "zzz"})}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], "abc ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "STOP");
  EXPECT_GE(engine_.cancels.load(), 1);
  EXPECT_EQ(engine_.submitted.back().stop.stop_strings, std::vector<std::string>({"STOP", "zzz"}));

  req["include_stop_str_in_output"] = true;
  r = Post("/v1/chat/completions", req);
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "abc STOP");
}

TEST_F(ApiServerTest, SamplingFieldsReachTheEngine) {
  engine_.SetOutputs({"x"});
  Json req = {{"messages", kUser}, {"temperature", 0.7}, {"top_p", 0.9}, {"top_k", 20}, {"min_p", 0.05},
              {"presence_penalty", 0.5}, {"frequency_penalty", -0.5}, {"repetition_penalty", 1.1},
              {"seed", 42}, {"logit_bias", {{"65", 5}}}, {"max_completion_tokens", 9}, {"n", 1},
              {"stop_token_ids", {66}}, {"ignore_eos", true}};
  ASSERT_EQ(Post("/v1/chat/completions", req).status, 200);
  const auto& s = engine_.submitted.back();
  EXPECT_FLOAT_EQ(s.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.sampling.top_p, 0.9f);
  EXPECT_EQ(s.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(s.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(s.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(s.sampling.logit_bias.at(65), 5.0f);
  EXPECT_EQ(s.max_tokens, 9);
  EXPECT_EQ(s.stop.stop_token_ids, std::vector<int32_t>({66}));
  EXPECT_TRUE(s.stop.ignore_eos);
  EXPECT_EQ(s.sampling.logprobs, -1);
}

TEST_F(ApiServerTest, SeveralSamplesWithLogprobs) {
  engine_.SetOutputs({"AB", "CDE"});
  Json req = {{"messages", kUser}, {"n", 2}, {"logprobs", true}, {"top_logprobs", 2}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "AB");
  EXPECT_EQ(j["choices"][1]["message"]["content"], "CDE");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  const Json& lp = j["choices"][1]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  EXPECT_EQ(lp[0]["token"], "C");
  EXPECT_DOUBLE_EQ(lp[0]["logprob"].get<double>(), -0.25);
  EXPECT_EQ(lp[0]["bytes"], Json::array({67}));
  ASSERT_EQ(lp[2]["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp[2]["top_logprobs"][1]["token"], "F");
  EXPECT_EQ(engine_.submitted.back().sampling.logprobs, 2);
  EXPECT_EQ(engine_.submitted.back().n, 2);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
}

TEST_F(ApiServerTest, CompletionsTextAndIdPromptsEchoAndLength) {
  engine_.SetOutputs({" world and more"});
  Json req = {{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 6}, {"echo", true}};
  ClientReply r = Post("/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "Hello world");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(engine_.submitted.back().prompt_ids, *codec_.Encode("Hello", false));

  Json ids_req = {{"prompt", Json::array({72, 105})}, {"max_tokens", 3}, {"logprobs", 1}, {"stream", true}};
  r = Post("/v1/completions", ids_req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(engine_.submitted.back().prompt_ids, std::vector<int32_t>({72, 105}));
  std::string text;
  size_t n_logprobs = 0;
  for (const auto& e : ParseSse(r.body)) {
    if (e.data == "[DONE]") continue;
    Json c = Json::parse(e.data);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["logprobs"].is_null()) n_logprobs += c["choices"][0]["logprobs"]["tokens"].size();
  }
  EXPECT_EQ(text, " wo");
  EXPECT_EQ(n_logprobs, 3u);
  // Completions default to 16 tokens.
  ASSERT_EQ(Post("/v1/completions", Json{{"prompt", "x"}}).status, 200);
  EXPECT_EQ(engine_.submitted.back().max_tokens, 16);
}

TEST_F(ApiServerTest, AnthropicMessagesBlocksAndStopReasons) {
  engine_.SetOutputs({"hmm</think>\n\nHi there"});
  Json req = {{"model", "tiny"}, {"max_tokens", 50}, {"system", "be brief"},
              {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}, {"messages", kUser}};
  ClientReply r = Post("/v1/messages", req, {{"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_EQ(j["content"][0], Json({{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}}));
  EXPECT_EQ(j["content"][1], Json({{"type", "text"}, {"text", "\n\nHi there"}}));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["output_tokens"], codec_.Encode("hmm</think>\n\nHi there", false)->size());
  EXPECT_EQ(codec_.last_kwargs["enable_thinking"], true);
  EXPECT_EQ(codec_.last_messages[0], Json({{"role", "system"}, {"content", "be brief"}}));

  // No thinking field: enable_thinking false; stop_sequences; max_tokens.
  engine_.SetOutputs({"one two three"});
  req.erase("thinking");
  req["stop_sequences"] = {"two"};
  j = Post("/v1/messages", req).json();
  EXPECT_EQ(codec_.last_kwargs["enable_thinking"], false);
  EXPECT_EQ(j["content"][0]["text"], "one ");
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "two");
  req.erase("stop_sequences");
  req["max_tokens"] = 2;
  EXPECT_EQ(Post("/v1/messages", req).json()["stop_reason"], "max_tokens");
}

TEST_F(ApiServerTest, AnthropicToolUseAndStreamingEvents) {
  engine_.SetOutputs({"why</think>ok<tool_call>\n<function=lookup>\n<parameter=q>\ncats\n</parameter>\n</function>\n</tool_call>"});
  Json req = {{"max_tokens", 100}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 2000}}},
              {"tools", Json::array({{{"name", "lookup"}, {"description", "find"},
                                      {"input_schema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}}})},
              {"messages", Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "find cats"}}})}},
                                        {{"role", "assistant"}, {"content", Json::array({{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "lookup"}, {"input", {{"q", "dogs"}}}}})}},
                                        {{"role", "user"}, {"content", Json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "no dogs"}}})}}})}};
  Json j = Post("/v1/messages", req).json();
  ASSERT_EQ(j["content"].size(), 3u) << j.dump();
  EXPECT_EQ(j["content"][2]["type"], "tool_use");
  EXPECT_EQ(j["content"][2]["name"], "lookup");
  EXPECT_EQ(j["content"][2]["input"], Json({{"q", "cats"}}));
  EXPECT_EQ(j["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  // The chat the template saw: tool_use -> tool_calls with object arguments, tool_result -> tool message.
  EXPECT_EQ(codec_.last_messages[1]["tool_calls"][0]["function"]["arguments"], Json({{"q", "dogs"}}));
  EXPECT_EQ(codec_.last_messages[2], Json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "no dogs"}}));
  EXPECT_EQ(codec_.last_tools[0]["function"]["parameters"]["properties"]["q"]["type"], "string");

  req["stream"] = true;
  ClientReply r = Post("/v1/messages", req);
  ASSERT_EQ(r.status, 200);
  auto events = ParseSse(r.body);
  std::vector<std::string> names;
  std::string thinking, text, partial_json;
  for (const auto& e : events) {
    Json d = Json::parse(e.data);
    EXPECT_EQ(d["type"], e.event);
    names.push_back(e.event);
    if (e.event == "content_block_delta") {
      const Json& delta = d["delta"];
      if (delta["type"] == "thinking_delta") thinking += delta["thinking"].get<std::string>();
      if (delta["type"] == "text_delta") text += delta["text"].get<std::string>();
      if (delta["type"] == "input_json_delta") partial_json += delta["partial_json"].get<std::string>();
    }
    if (e.event == "content_block_start" && d["content_block"]["type"] == "tool_use") {
      EXPECT_EQ(d["index"], 2);
      EXPECT_EQ(d["content_block"]["name"], "lookup");
    }
    if (e.event == "message_delta") {
      EXPECT_EQ(d["delta"]["stop_reason"], "tool_use");
      EXPECT_GT(d["usage"]["output_tokens"].get<int>(), 0);
    }
  }
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[1], "ping");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(std::count(names.begin(), names.end(), "content_block_start"), 3);
  EXPECT_EQ(std::count(names.begin(), names.end(), "content_block_stop"), 3);
  EXPECT_EQ(thinking, "why");
  EXPECT_EQ(text, "ok");
  EXPECT_EQ(Json::parse(partial_json), Json({{"q", "cats"}}));
}

TEST_F(ApiServerTest, CountTokensTokenizeDetokenizeModels) {
  Json req = {{"model", "tiny"}, {"messages", kUser}};
  ClientReply r = Post("/v1/messages/count_tokens", req);
  ASSERT_EQ(r.status, 200) << r.body;
  auto prompt = codec_.RenderChat(codec_.last_messages, nullptr, true, false, {{"enable_thinking", false}});
  EXPECT_EQ(r.json()["input_tokens"], codec_.Encode(*prompt, false)->size());

  r = Post("/tokenize", Json{{"prompt", "ab<think>"}, {"return_token_strs", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["tokens"], Json::array({97, 98, FakeCodec::kThink}));
  EXPECT_EQ(r.json()["count"], 3);
  EXPECT_EQ(r.json()["max_model_len"], 512);
  EXPECT_EQ(r.json()["token_strs"], Json::array({"a", "b", "<think>"}));
  r = Post("/tokenize", Json{{"messages", kUser}});
  EXPECT_EQ(r.json()["count"], codec_.Encode(*codec_.RenderChat(kUser, nullptr, true, false, Json::object()), false)->size());
  r = Post("/detokenize", Json{{"tokens", {104, 105, FakeCodec::kImEnd}}});
  EXPECT_EQ(r.json()["prompt"], "hi<|im_end|>");

  r = Get("/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["object"], "list");
  EXPECT_EQ(r.json()["data"][0]["id"], "tiny");
  EXPECT_EQ(r.json()["data"][0]["object"], "model");
}

TEST_F(ApiServerTest, BadRequestsGetClearErrorsInEachApisShape) {
  TestClient c(server_->port());
  ExpectOpenAiError(c.Send("POST", "/v1/chat/completions", "{not json"), 400, "invalid JSON");
  ExpectOpenAiError(c.Send("POST", "/v1/chat/completions", "[1]"), 400, "JSON object");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"temperature", "hot"}}), 400,
                    "'temperature' must be a number");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", Json::array()}}), 400, "must not be empty");
  ExpectOpenAiError(Post("/v1/chat/completions", Json::object()), 400, "'messages' is required");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), 400,
                    "unknown role 'wizard'");
  ExpectOpenAiError(
      Post("/v1/chat/completions",
           Json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}}),
      400, "images are not supported yet");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"max_tokens", 100000}}), 400,
                    "maximum context length is 512 tokens");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"max_tokens", 0}}), 400, "at least 1");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"top_p", 0}}), 400, "top_p");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"logit_bias", {{"99999", 1}}}}), 400,
                    "logit_bias");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"tool_choice", "required"}}), 400,
                    "needs 'tools'");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"model", "gpt-9"}}), 404, "gpt-9");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", {{{"role", "user"}, {"content", "RAISE"}}}}}), 400,
                    "template says no");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", {"a", Json::array({1})}}}), 400, "'prompt'");
  ExpectOpenAiError(Post("/v1/nope", Json{}), 404, "no route");
  ExpectOpenAiError(Get("/v1/chat/completions"), 405, "use POST");
  std::string big(70 * 1024, 'x');
  ExpectOpenAiError(TestClient(server_->port()).Send("POST", "/v1/chat/completions", big), 413, "exceeds the limit");
  ExpectAnthropicError(TestClient(server_->port()).Send("POST", "/v1/messages", big), 413, "request_too_large", "limit");
  ExpectAnthropicError(Post("/v1/messages", Json{{"messages", kUser}}), 400, "invalid_request_error", "max_tokens");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", 5}, {"messages", {{{"role", "system"}, {"content", "x"}}}}}),
                       400, "invalid_request_error", "unexpected role");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", 5}, {"messages", kUser}, {"temperature", 1.5}}), 400,
                       "invalid_request_error", "temperature");
  EXPECT_TRUE(engine_.submitted.empty());
  // The server keeps serving.
  engine_.SetOutputs({"fine"});
  EXPECT_EQ(Post("/v1/chat/completions", Json{{"messages", kUser}}).status, 200);
}

TEST_F(ApiServerTest, ApiKeyGuardsTheApiButNotHealth) {
  StartServer("s3cret");
  engine_.SetOutputs({"x"});
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}}), 401, "API key");
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}}, {{"Authorization", "Bearer s3cre"}}), 401,
                    "API key");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", 3}, {"messages", kUser}}, {{"x-api-key", "nope"}}), 401,
                       "authentication_error", "API key");
  EXPECT_EQ(Post("/v1/chat/completions", Json{{"messages", kUser}}, {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(Post("/v1/messages", Json{{"max_tokens", 3}, {"messages", kUser}}, {{"x-api-key", "s3cret"}}).status, 200);
  EXPECT_EQ(Get("/health").status, 200);
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
}

TEST_F(ApiServerTest, FullQueueIs429WithRetryAfterAndLoadingIs503) {
  engine_.SetSubmitError(absl::ResourceExhaustedError("waiting queue full (8)"));
  ClientReply r = Post("/v1/chat/completions", Json{{"messages", kUser}});
  ExpectOpenAiError(r, 429, "queue full");
  EXPECT_EQ(r.headers["retry-after"], "1");
  ExpectAnthropicError(Post("/v1/messages", Json{{"max_tokens", 3}, {"messages", kUser}}), 429, "rate_limit_error", "busy");
  engine_.SetSubmitError(absl::OkStatus());

  ready_ = false;
  EXPECT_EQ(Get("/health").status, 503);
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}}), 503, "loading");
  ready_ = true;
  EXPECT_EQ(Get("/health").status, 200);
}

TEST_F(ApiServerTest, EngineErrorMidStreamIsAnErrorEvent) {
  engine_.SetError("device lost");
  ClientReply r = Post("/v1/chat/completions", Json{{"messages", kUser}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  auto events = ParseSse(r.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().data, "[DONE]");
  Json err = Json::parse(events[events.size() - 2].data);
  EXPECT_NE(err["error"]["message"].get<std::string>().find("device lost"), std::string::npos);
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}}), 500, "device lost");
  engine_.SetError("");
}

TEST_F(ApiServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  engine_.SetOutputs({"ok"});
  TestClient c(server_->port());
  for (int i = 0; i < 3; ++i) {
    ClientReply r = c.Send("POST", "/v1/chat/completions", Json{{"messages", kUser}, {"stream", i == 1}}.dump());
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(c.Send("GET", "/v1/models").status, 200);
}

TEST_F(ApiServerTest, ClientThatLeavesMidStreamCancelsItsRequest) {
  engine_.SetDelay(std::chrono::milliseconds(5));
  engine_.SetOutputs({std::string(2000, 'a')});
  {
    TestClient c(server_->port());
    namespace bhttp = boost::beast::http;
    bhttp::request<bhttp::string_body> req(bhttp::verb::post, "/v1/chat/completions", 11);
    req.set(bhttp::field::host, "x");
    req.body() = Json{{"messages", kUser}, {"stream", true}}.dump();
    req.prepare_payload();
    bhttp::write(c.socket(), req);
    char buf[256];
    c.socket().read_some(boost::asio::buffer(buf));  // the stream has started
  }  // closed
  for (int i = 0; i < 400 && (engine_.running() > 0 || server_->in_flight() > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine_.running(), 0);
  EXPECT_GE(engine_.cancels.load(), 1);
  EXPECT_EQ(server_->in_flight(), 0);
}

TEST_F(ApiServerTest, DrainingRefusesNewRequestsAndFinishesStreams) {
  engine_.SetDelay(std::chrono::milliseconds(2));
  engine_.SetOutputs({std::string(60, 'b')});
  std::string streamed;
  std::thread t([&] {
    ClientReply r = Post("/v1/chat/completions", Json{{"messages", kUser}, {"stream", true}});
    streamed = r.body;
  });
  for (int i = 0; i < 200 && server_->in_flight() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->BeginDrain();
  ClientReply refused = Post("/v1/chat/completions", Json{{"messages", kUser}});
  ExpectOpenAiError(refused, 503, "shutting down");
  EXPECT_TRUE(server_->WaitDrained(std::chrono::seconds(5)));
  t.join();
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos);
}

TEST_F(ApiServerTest, MetricsPageAfterRequests) {
  engine_.SetOutputs({"abc"});
  ASSERT_EQ(Post("/v1/chat/completions", Json{{"messages", kUser}}).status, 200);
  ClientReply r = Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"].rfind("text/plain", 0), 0u);
  for (const char* line : {"sparkserve:request_success_total{finished_reason=\"stop\",model_name=\"tiny\"} 5",
                           "sparkserve:time_to_first_token_seconds_bucket{le=\"1.0\",model_name=\"tiny\"} 1",
                           "sparkserve:time_to_first_token_seconds_count{model_name=\"tiny\"} 1",
                           "sparkserve:http_responses_total{status=\"200\",model_name=\"tiny\"} 1",
                           "sparkserve:engine_steps_total{model_name=\"tiny\"} 7",
                           "sparkserve:kv_cache_usage_perc{model_name=\"tiny\"} 0.25",
                           "# TYPE sparkserve:num_requests_running gauge"}) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  }
}

}  // namespace
}  // namespace sparkserve::head::http
