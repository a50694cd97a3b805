// tool_choice through the HTTP layer: required/any and named choices force the start of a call,
// which the output parser reads first (fake engine replaying the rest of the call).
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

// tool_choice enforcement: the forced start of a call is appended to the prompt ids and read by the
// parser first, so a replayed output holding only the rest of the call is still a call.
const Json kWeatherTools = Json::array(
    {{{"type", "function"},
      {"function", {{"name", "get_weather"},
                    {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
     {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}}}}}}});

std::vector<int32_t> Ids(const FakeCodec& codec, const std::string& s) { return *codec.Encode(s, false); }

bool EndsWith(const std::vector<int32_t>& ids, const std::vector<int32_t>& tail) {
  return ids.size() >= tail.size() && std::equal(tail.begin(), tail.end(), ids.end() - static_cast<long>(tail.size()));
}

TEST_F(ApiServerTest, NamedToolChoiceForcesTheCallNonStreamingAndStreaming) {
  const std::string rest = "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
  engine_.SetOutputs({rest});
  Json req = {{"messages", kUser},
              {"tools", kWeatherTools},
              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
              {"chat_template_kwargs", {{"enable_thinking", true}}}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(msg["content"].is_null()) << msg.dump();
  EXPECT_TRUE(msg["reasoning_content"].is_null()) << msg.dump();
  ASSERT_EQ(msg["tool_calls"].size(), 1u) << msg.dump();
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  // The prompt as sent: the rendered chat (thinking off for a forced choice) + the forced start.
  ASSERT_FALSE(engine_.submitted.empty());
  const auto& prompt = engine_.submitted.back().prompt_ids;
  const std::vector<int32_t> forced = Ids(codec_, "<tool_call>\n<function=get_weather>\n");
  EXPECT_TRUE(EndsWith(prompt, forced));
  EXPECT_TRUE(EndsWith(std::vector<int32_t>(prompt.begin(), prompt.end() - static_cast<long>(forced.size())),
                       Ids(codec_, "<|im_start|>assistant\n")));
  EXPECT_EQ(codec_.last_kwargs["enable_thinking"], false);
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], Ids(codec_, rest).size());

  req["stream"] = true;
  r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200);
  std::string name, args, content, finish;
  int named_deltas = 0;
  for (const auto& e : ParseSse(r.body)) {
    if (e.data == "[DONE]") continue;
    Json c = Json::parse(e.data);
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      const Json& fn = d["tool_calls"][0]["function"];
      if (fn.contains("name")) {
        ++named_deltas;
        name += fn["name"].get<std::string>();
      }
      if (fn.contains("arguments")) args += fn["arguments"].get<std::string>();
    }
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "");
  EXPECT_EQ(named_deltas, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(Json::parse(args), Json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ApiServerTest, RequiredToolChoiceForcesACall) {
  engine_.SetOutputs({"<function=get_time>\n</function>\n</tool_call>"});
  Json req = {{"messages", kUser}, {"tools", kWeatherTools}, {"tool_choice", "required"}};
  ClientReply r = Post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << j.dump();
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_TRUE(EndsWith(engine_.submitted.back().prompt_ids, Ids(codec_, "<|im_start|>assistant\n<tool_call>\n")));
  EXPECT_EQ(j["usage"]["prompt_tokens"], engine_.submitted.back().prompt_ids.size());

  // auto: nothing is forced (the same output is then not a call: its opening is missing).
  req["tool_choice"] = "auto";
  j = Post("/v1/chat/completions", req).json();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "<function=get_time>\n</function>\n</tool_call>");
  EXPECT_TRUE(EndsWith(engine_.submitted.back().prompt_ids, Ids(codec_, "<|im_start|>assistant\n")));

  // A forced choice without a generation prompt has nowhere to start the call.
  req["tool_choice"] = "required";
  req["add_generation_prompt"] = false;
  ExpectOpenAiError(Post("/v1/chat/completions", req), 400, "add_generation_prompt");
}

TEST_F(ApiServerTest, NamedToolChoiceInTheJsonForm) {
  family_ = text::ModelFamily::kQwen3;
  StartServer("");
  engine_.SetOutputs({"{\"city\": \"Paris\"}}\n</tool_call>"});
  Json req = {{"messages", kUser}, {"tools", kWeatherTools},
              {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  Json j = Post("/v1/chat/completions", req).json();
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << j.dump();
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            Json({{"city", "Paris"}}));
  EXPECT_TRUE(EndsWith(engine_.submitted.back().prompt_ids,
                       Ids(codec_, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ")));
}

TEST_F(ApiServerTest, ForcedToolChoiceNeedsAToolCallFormat) {
  family_ = text::ModelFamily::kNone;
  StartServer("");
  engine_.SetOutputs({"x"});
  Json req = {{"messages", kUser}, {"tools", kWeatherTools}, {"tool_choice", "required"}};
  ExpectOpenAiError(Post("/v1/chat/completions", req), 400, "cannot force");
  req["tool_choice"] = "auto";
  EXPECT_EQ(Post("/v1/chat/completions", req).status, 200);
}

const Json kLookupTools = Json::array(
    {{{"name", "lookup"}, {"input_schema", {{"type", "object"}, {"properties", {{"q", {{"type", "string"}}}}}}}},
     {{"name", "other"}, {"input_schema", {{"type", "object"}}}}});

TEST_F(ApiServerTest, AnthropicToolAndAnyChoicesForceToolUse) {
  const std::string rest = "<parameter=q>\ncats\n</parameter>\n</function>\n</tool_call>";
  engine_.SetOutputs({rest});
  Json req = {{"max_tokens", 100}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 2000}}},
              {"tools", kLookupTools}, {"tool_choice", {{"type", "tool"}, {"name", "lookup"}}},
              {"messages", Json::array({{{"role", "user"}, {"content", "find cats"}}})}};
  Json j = Post("/v1/messages", req).json();
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["name"], "lookup");
  EXPECT_EQ(j["content"][0]["input"], Json({{"q", "cats"}}));
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_EQ(codec_.last_kwargs["enable_thinking"], false);
  const auto& prompt = engine_.submitted.back().prompt_ids;
  EXPECT_TRUE(EndsWith(prompt, Ids(codec_, "<|im_start|>assistant\n<tool_call>\n<function=lookup>\n")));
  EXPECT_EQ(j["usage"]["input_tokens"], prompt.size());
  Json count = Post("/v1/messages/count_tokens", req).json();
  EXPECT_EQ(count["input_tokens"], prompt.size());

  req["stream"] = true;
  ClientReply r = Post("/v1/messages", req);
  ASSERT_EQ(r.status, 200);
  std::string partial_json, stop_reason;
  std::vector<std::string> block_types;
  for (const auto& e : ParseSse(r.body)) {
    Json d = Json::parse(e.data);
    if (e.event == "content_block_start") {
      block_types.push_back(d["content_block"]["type"]);
      if (d["content_block"]["type"] == "tool_use") {
        EXPECT_EQ(d["content_block"]["name"], "lookup");
      }
    }
    if (e.event == "content_block_delta" && d["delta"]["type"] == "input_json_delta") {
      partial_json += d["delta"]["partial_json"].get<std::string>();
    }
    if (e.event == "message_delta") stop_reason = d["delta"]["stop_reason"];
  }
  EXPECT_EQ(block_types, std::vector<std::string>{"tool_use"});
  EXPECT_EQ(Json::parse(partial_json), Json({{"q", "cats"}}));
  EXPECT_EQ(stop_reason, "tool_use");

  // any: the call is opened, the model names the tool.
  engine_.SetOutputs({"<function=other>\n</function>\n</tool_call>"});
  req["stream"] = false;
  req["tool_choice"] = {{"type", "any"}};
  j = Post("/v1/messages", req).json();
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["name"], "other");
  EXPECT_EQ(j["stop_reason"], "tool_use");
  EXPECT_TRUE(EndsWith(engine_.submitted.back().prompt_ids, Ids(codec_, "<|im_start|>assistant\n<tool_call>\n")));

  // none: a call the model writes anyway stays text.
  const std::string call = "<tool_call>\n<function=lookup>\n" + rest;
  engine_.SetOutputs({call});
  req["tool_choice"] = {{"type", "none"}};
  req.erase("thinking");
  j = Post("/v1/messages", req).json();
  ASSERT_EQ(j["content"].size(), 1u) << j.dump();
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["content"][0]["text"], call);
  EXPECT_EQ(j["stop_reason"], "end_turn");

  req["tool_choice"] = {{"type", "tool"}, {"name", "nope"}};
  ExpectAnthropicError(Post("/v1/messages", req), 400, "invalid_request_error", "'nope'");
}

TEST_F(ApiServerTest, ForcedStartClosesReasoningTheTemplateLeftOpen) {
  // A template that ignores enable_thinking=false: the forced text closes <think> first.
  RenderedChat chat;
  chat.prompt = "<|im_start|>assistant\n<think>\n";
  chat.prompt_ids = Ids(codec_, chat.prompt);
  chat.starts_in_reasoning = true;
  ToolChoice choice{ToolChoice::Mode::kNamed, "get_weather"};
  std::string forced = ForceToolCallStart(ctx_, choice, chat);
  EXPECT_EQ(forced, "<tool_call>\n<function=get_weather>\n");
  EXPECT_EQ(chat.prompt, "<|im_start|>assistant\n<think>\n</think>\n\n<tool_call>\n<function=get_weather>\n");
  EXPECT_EQ(chat.prompt_ids, Ids(codec_, chat.prompt));
  EXPECT_FALSE(chat.starts_in_reasoning);
  auto parser = ctx_.parser_factory(PieceParserOptions{chat.starts_in_reasoning, true, true, kWeatherTools, forced})();
  std::vector<OutputPiece> pieces = parser->Feed("<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
  auto tail = parser->Finish();
  pieces.insert(pieces.end(), tail.begin(), tail.end());
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].kind, OutputPiece::Kind::kToolCallName);
  EXPECT_EQ(pieces[0].text, "get_weather");
  EXPECT_EQ(pieces[1].kind, OutputPiece::Kind::kToolCallArguments);
  // Not forced: nothing changes.
  RenderedChat plain = chat;
  EXPECT_EQ(ForceToolCallStart(ctx_, ToolChoice{}, plain), "");
  EXPECT_EQ(plain.prompt_ids, chat.prompt_ids);
  EXPECT_EQ(ForcedToolCallText(ToolCallMarkup::kQwenJson, {ToolChoice::Mode::kNamed, "a\"b"}),
            "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ");
}

}  // namespace
}  // namespace sparkserve::head::http
