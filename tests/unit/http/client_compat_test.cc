// What real clients send, in-process against the fake engine and codec: agent-loop histories
// (an assistant turn of tool calls with null or no content, as the OpenAI SDK returns it; Anthropic
// turns of tool_use blocks only), the reasoning switches (reasoning_effort, Anthropic `thinking`),
// and /v1/completions with a list of prompts (batch evaluation clients).
#include <set>

#include "tests/unit/http/api_server_fixture.h"

namespace sparkserve::head::http {
namespace {

using testing::ApiServerTest;
using testing::ClientReply;
using testing::ExpectOpenAiError;
using testing::kUser;
using testing::ParseSse;

const Json kCall = {{"id", "call_1"}, {"type", "function"},
                    {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}};

Json ToolLoopHistory(const Json& assistant) {
  return Json::array({{{"role", "user"}, {"content", "weather?"}}, assistant,
                      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}});
}

TEST_F(ApiServerTest, AssistantToolCallTurnWithNullOrNoContentReachesTheTemplateAsEmptyText) {
  engine_.SetOutputs({"ok"});
  // What the OpenAI SDK hands back after a tool call (content null), and the same without the key.
  Json with_null = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {kCall}}};
  Json without = {{"role", "assistant"}, {"tool_calls", {kCall}}};
  for (const Json& assistant : {with_null, without}) {
    ClientReply r = Post("/v1/chat/completions", Json{{"messages", ToolLoopHistory(assistant)}});
    ASSERT_EQ(r.status, 200) << r.body;
    const Json& m = codec_.last_messages.at(1);
    EXPECT_EQ(m["content"], "") << assistant.dump();
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], Json({{"city", "Paris"}}));
  }
  // Other roles keep needing content.
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", {{{"role", "user"}}}}}), 400, "needs 'content'");
}

TEST_F(ApiServerTest, AnthropicAssistantTurnOfToolUseOnlyReachesTheTemplateAsEmptyText) {
  engine_.SetOutputs({"ok"});
  Json msgs = Json::array(
      {{{"role", "user"}, {"content", "weather?"}},
       {{"role", "assistant"},
        {"content", {{{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}}}},
       {{"role", "user"},
        {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}}}}}});
  ClientReply r = Post("/v1/messages", Json{{"max_tokens", 5}, {"messages", msgs}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(codec_.last_messages.at(1)["content"], "");
  EXPECT_EQ(codec_.last_messages.at(1)["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST_F(ApiServerTest, ReasoningEffortNoneTurnsThinkingOffAndExplicitKwargsWin) {
  engine_.SetOutputs({"ok"});
  auto kwargs_for = [&](const Json& extra) {
    Json req = {{"messages", kUser}};
    req.update(extra);
    ClientReply r = Post("/v1/chat/completions", req);
    EXPECT_EQ(r.status, 200) << r.body;
    return codec_.last_kwargs;
  };
  Json k = kwargs_for({{"reasoning_effort", "none"}});
  EXPECT_EQ(k["enable_thinking"], false);
  EXPECT_EQ(k["reasoning_effort"], "none");  // also a template variable, as vLLM passes it
  EXPECT_EQ(kwargs_for({{"reasoning_effort", "high"}})["enable_thinking"], true);
  EXPECT_EQ(kwargs_for({{"reasoning_effort", "minimal"}})["enable_thinking"], true);
  EXPECT_FALSE(kwargs_for(Json::object()).contains("enable_thinking"));  // the template's own default
  EXPECT_EQ(kwargs_for({{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", true}}}})
                ["enable_thinking"], true);
  EXPECT_FALSE(kwargs_for({{"reasoning_effort", nullptr}}).contains("enable_thinking"));
  ExpectOpenAiError(Post("/v1/chat/completions", Json{{"messages", kUser}, {"reasoning_effort", "extreme"}}), 400,
                    "reasoning_effort");
}

TEST_F(ApiServerTest, AnthropicAdaptiveThinkingIsThinkingOn) {
  engine_.SetOutputs({"ok"});
  ClientReply r = Post("/v1/messages", Json{{"max_tokens", 5}, {"messages", kUser}, {"thinking", {{"type", "adaptive"}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(codec_.last_kwargs["enable_thinking"], true);
}

TEST_F(ApiServerTest, CompletionsWithAListOfPromptsAnswerOneChoicePerPromptAndSample) {
  engine_.SetOutputsForPrompt("Hello", {" A", " B"});
  engine_.SetOutputsForPrompt("Bye", {" C", " D"});
  Json req = {{"prompt", {"Hello", "Bye"}}, {"n", 2}, {"max_tokens", 5}, {"echo", true}};
  ClientReply r = Post("/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  ASSERT_EQ(j["choices"].size(), 4u);
  const std::vector<std::string> want = {"Hello A", "Hello B", "Bye C", "Bye D"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);  // prompt_index * n + sample_index
    EXPECT_EQ(j["choices"][i]["text"], want[i]);
    EXPECT_EQ(j["choices"][i]["finish_reason"], "stop");
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 8);
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  ASSERT_EQ(engine_.submitted.size(), 2u);
  EXPECT_EQ(engine_.submitted[0].prompt_ids, *codec_.Encode("Hello", false));
  EXPECT_EQ(engine_.submitted[1].prompt_ids, *codec_.Encode("Bye", false));
  EXPECT_EQ(engine_.submitted[1].n, 2);

  // Streaming, token-id prompts: each chunk's index as above, usage summed.
  engine_.SetOutputsForPrompt("Hi", {"xy"});
  engine_.SetOutputsForPrompt("B", {"z"});
  Json ids = {{"prompt", {Json::array({72, 105}), Json::array({66})}}, {"stream", true},
              {"stream_options", {{"include_usage", true}}}, {"logprobs", 0}};
  r = Post("/v1/completions", ids);
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<int, std::string> text;
  std::map<int, size_t> logprobs;
  std::set<int> finished;
  Json usage;
  for (const auto& e : ParseSse(r.body)) {
    if (e.data == "[DONE]") continue;
    Json c = Json::parse(e.data);
    if (!c["usage"].is_null()) usage = c["usage"];
    for (const auto& ch : c["choices"]) {
      text[ch["index"].get<int>()] += ch["text"].get<std::string>();
      if (!ch["logprobs"].is_null()) logprobs[ch["index"].get<int>()] += ch["logprobs"]["tokens"].size();
      if (!ch["finish_reason"].is_null()) finished.insert(ch["index"].get<int>());
    }
  }
  EXPECT_EQ(text, (std::map<int, std::string>{{0, "xy"}, {1, "z"}}));
  EXPECT_EQ(logprobs, (std::map<int, size_t>{{0, 2}, {1, 1}}));
  EXPECT_EQ(finished, (std::set<int>{0, 1}));
  EXPECT_EQ(usage["prompt_tokens"], 3);
  EXPECT_EQ(usage["completion_tokens"], 3);
}

TEST_F(ApiServerTest, CompletionsPromptListLimitsAndMalformedLists) {
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", std::vector<std::string>(129, "a")}}), 400,
                    "at most 128 prompts");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", std::vector<std::string>(65, "a")}, {"n", 2}}), 400,
                    "prompts times n");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", Json::array()}}), 400, "'prompt'");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", {"a", Json::array({1})}}}), 400, "'prompt'");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", {Json::array({1}), Json::array()}}}), 400, "empty");
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", {"a", ""}}}), 400, "empty");
  // Each prompt must fit the context with max_tokens, as a single one must.
  ExpectOpenAiError(Post("/v1/completions", Json{{"prompt", {"a", std::string(600, 'x')}}}), 400,
                    "maximum context length");
  EXPECT_TRUE(engine_.submitted.empty());
}

}  // namespace
}  // namespace sparkserve::head::http
