// /v1/chat/completions: parsing, chat rendering and the OpenAI chat response shapes.
#include "head/http/openai_chat.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <string_view>

#include "fmt/format.h"
#include "text/output/output_parser.h"
#include "head/http/api_error.h"
#include "head/http/sampling_fields.h"
#include "head/http/structured_output.h"
#include "head/http/tool_choice.h"

namespace sparkserve::head::http {

double JsonLogprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

namespace {

// Text of a content field: a string, null, or an array of text parts.
Json NormalizeContent(const Json& content, size_t msg_index) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) {
    throw RequestError(400, fmt::format("messages[{}].content must be a string or an array of content parts",
                                        msg_index), "messages");
  }
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object()) {
      throw RequestError(400, fmt::format("messages[{}].content parts must be objects", msg_index), "messages");
    }
    auto type = OptString(part, "type").value_or("");
    if (type == "text") {
      auto t = part.find("text");
      if (t == part.end() || !t->is_string()) {
        throw RequestError(400, fmt::format("messages[{}]: a text part needs a string 'text'", msg_index),
                           "messages");
      }
      text += t->get<std::string>();
    } else if (type == "image_url" || type == "image" || type == "input_image") {
      throw RequestError(400, "images are not supported yet", "messages");
    } else if (type == "input_audio" || type == "audio_url") {
      throw RequestError(400, "audio is not supported", "messages");
    } else if (type == "video_url") {
      throw RequestError(400, "videos are not supported yet", "messages");
    } else {
      throw RequestError(400, fmt::format("messages[{}]: unknown content part type '{}'", msg_index, type),
                         "messages");
    }
  }
  return text;
}

}  // namespace

Json NormalizeChatMessages(const Json& messages) {
  if (!messages.is_array()) throw RequestError(400, "'messages' must be an array", "messages");
  if (messages.empty()) throw RequestError(400, "'messages' must not be empty", "messages");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object()) throw RequestError(400, fmt::format("messages[{}] must be an object", i), "messages");
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) {
      throw RequestError(400, fmt::format("messages[{}] needs a string 'role'", i), "messages");
    }
    std::string role = role_it->get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      throw RequestError(400, fmt::format("messages[{}] has an unknown role '{}' (expected system, developer, "
                                          "user, assistant or tool)", i, role), "messages");
    }
    Json msg = Json::object();
    msg["role"] = role == "developer" ? "system" : role;
    auto content = m.find("content");
    if (role == "assistant" && (content == m.end() || content->is_null())) {
      // What the OpenAI SDK returns after a tool call, and every agent loop appends as is. Templates
      // test and concatenate content (the Qwen3 one fails on `'</think>' in None`): the empty text.
      msg["content"] = "";
    } else if (content != m.end()) {
      msg["content"] = NormalizeContent(*content, i);
    } else {
      throw RequestError(400, fmt::format("messages[{}] ({}) needs 'content'", i, role), "messages");
    }
    if (role == "assistant") {
      for (const char* key : {"reasoning_content", "reasoning"}) {
        auto r = m.find(key);
        if (r != m.end() && !r->is_null()) {
          if (!r->is_string()) throw RequestError(400, fmt::format("messages[{}].{} must be a string", i, key), "messages");
          msg["reasoning_content"] = *r;
          break;
        }
      }
      auto tc = m.find("tool_calls");
      if (tc != m.end() && !tc->is_null()) {
        if (!tc->is_array()) throw RequestError(400, fmt::format("messages[{}].tool_calls must be an array", i), "messages");
        Json calls = Json::array();
        for (const auto& call : *tc) {
          const Json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
          if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
            throw RequestError(400, fmt::format("messages[{}].tool_calls entries need function.name", i), "messages");
          }
          Json args = Json::object();
          auto a = fn->find("arguments");
          if (a != fn->end() && a->is_string()) {
            args = ParseJsonField(a->get<std::string>(),
                                  fmt::format("messages[{}].tool_calls: the arguments of '{}'", i,
                                              (*fn)["name"].get<std::string>()),
                                  "messages");
          } else if (a != fn->end() && a->is_object()) {
            args = *a;
          }
          Json c = {{"id", StringOr(call, "id", "", fmt::format("messages[{}].tool_calls[]", i))}, {"type", "function"},
                    {"function", {{"name", (*fn)["name"]}, {"arguments", args}}}};
          calls.push_back(std::move(c));
        }
        msg["tool_calls"] = std::move(calls);
      }
    }
    if (role == "tool") {
      if (auto id = OptString(m, "tool_call_id")) msg["tool_call_id"] = *id;
    }
    if (auto name = m.find("name"); name != m.end() && name->is_string()) msg["name"] = *name;
    out.push_back(std::move(msg));
  }
  return out;
}

Json NormalizeChatTools(const Json& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw RequestError(400, "'tools' must be an array", "tools");
  if (it->empty()) return nullptr;
  Json out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_object() || StringOr(t, "type", "", "tools[]") != "function" || !t.contains("function") ||
        !t["function"].is_object() || !t["function"].contains("name")) {
      throw RequestError(400, "each of 'tools' must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                         "tools");
    }
    const Json& fn = t["function"];
    auto desc = fn.find("description");
    auto params = fn.find("parameters");
    CheckToolDefinition(fn["name"], desc == fn.end() ? nullptr : &*desc, params == fn.end() ? nullptr : &*params,
                        "function.parameters", fmt::format("tools[{}]", i), "tools");
    out.push_back(t);
  }
  return out;
}

void ApplyReasoningEffort(const Json& body, Json& template_kwargs) {
  auto it = body.find("reasoning_effort");
  if (it == body.end() || it->is_null()) return;
  static constexpr std::string_view kLevels[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
  const bool known = it->is_string() &&
                     std::find(std::begin(kLevels), std::end(kLevels), it->get<std::string>()) != std::end(kLevels);
  if (!known) {
    throw RequestError(400, "'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max",
                       "reasoning_effort");
  }
  const std::string effort = it->get<std::string>();
  if (!template_kwargs.contains("reasoning_effort")) template_kwargs["reasoning_effort"] = effort;
  if (!template_kwargs.contains("enable_thinking")) template_kwargs["enable_thinking"] = effort != "none";
}

void CheckToolDefinition(const Json& name, const Json* description, const Json* schema, const char* schema_key,
                         const std::string& where, const char* param) {
  auto fail = [&](const std::string& what) { throw RequestError(400, fmt::format("{}: {}", where, what), param); };
  if (!name.is_string()) fail(fmt::format("the tool's name must be a string, got {}", JsonTypeName(name)));
  const std::string& n = name.get_ref<const std::string&>();
  if (n.empty() || n.size() > 128) fail("the tool's name must have 1 to 128 characters");
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':')) {
      fail(fmt::format("the tool's name '{}' may only hold letters, digits and _ . : -", n));
    }
  }
  if (description && !description->is_null() && !description->is_string()) {
    fail(fmt::format("the tool's description must be a string, got {}", JsonTypeName(*description)));
  }
  if (!schema || schema->is_null()) return;
  if (!schema->is_object()) fail(fmt::format("{} must be a JSON Schema object, got {}", schema_key, JsonTypeName(*schema)));
  if (auto type = schema->find("type"); type != schema->end() && *type != "object") {
    fail(fmt::format("{}.type must be \"object\"", schema_key));
  }
  if (auto props = schema->find("properties"); props != schema->end() && !props->is_null()) {
    if (!props->is_object()) fail(fmt::format("{}.properties must be an object", schema_key));
    for (const auto& [key, sub] : props->items()) {
      if (!sub.is_object() && !sub.is_boolean()) {
        fail(fmt::format("{}.properties.{} must be a schema (an object)", schema_key, key));
      }
    }
  }
  if (auto req = schema->find("required"); req != schema->end() && !req->is_null()) {
    bool ok = req->is_array();
    for (size_t k = 0; ok && k < req->size(); ++k) ok = (*req)[k].is_string();
    if (!ok) fail(fmt::format("{}.required must be an array of property names", schema_key));
  }
}

namespace {

// Tokens `messages` render to without a generation prompt, shared with `prompt_ids` (templates
// may tokenize a boundary differently); empty when the template refuses them.
std::vector<int32_t> SharedRender(const ServingContext& ctx, const Json& messages, const Json& tools,
                                  const Json& kwargs, const std::vector<int32_t>& prompt_ids) {
  auto text = ctx.codec->RenderChat(messages, tools, false, false, kwargs);
  if (!text.ok()) return {};
  auto ids = ctx.codec->Encode(*text, /*add_special_tokens=*/false);
  if (!ids.ok()) return {};
  size_t n = 0;
  while (n < ids->size() && n < prompt_ids.size() && (*ids)[n] == prompt_ids[n]) ++n;
  ids->resize(n);
  return std::move(*ids);
}

}  // namespace

std::vector<int32_t> ChatCachePoints(const ServingContext& ctx, const Json& messages, const Json& tools,
                                     const Json& kwargs, const std::vector<int32_t>& prompt_ids) {
  std::vector<int32_t> points;
  // The conversation without the generation prompt: what the next turn repeats.
  const std::vector<int32_t> whole = SharedRender(ctx, messages, tools, kwargs, prompt_ids);
  if (!whole.empty()) points.push_back(static_cast<int32_t>(whole.size()));
  // A leading system message shared by many users: where it ends. Templates may refuse a lone
  // system message (Qwen3.5's does), so render it before two different user messages and keep
  // what the two share.
  if (messages.is_array() && messages.size() >= 2 && messages[0].is_object() &&
      messages[0].value("role", "") == "system") {
    Json a = Json::array({messages[0], Json{{"role", "user"}, {"content", "a"}}});
    Json b = Json::array({messages[0], Json{{"role", "user"}, {"content", "b"}}});
    const std::vector<int32_t> ra = SharedRender(ctx, a, tools, kwargs, prompt_ids);
    const std::vector<int32_t> rb = SharedRender(ctx, b, tools, kwargs, prompt_ids);
    const size_t n = std::min(ra.size(), rb.size());
    if (n > 0) points.push_back(static_cast<int32_t>(n));
  }
  return points;
}

RenderedChat RenderChatPrompt(const ServingContext& ctx, const Json& messages, const Json& tools,
                              bool add_generation_prompt, bool continue_final_message,
                              const Json& template_kwargs) {
  RenderedChat r;
  auto prompt = ctx.codec->RenderChat(messages, tools, add_generation_prompt, continue_final_message,
                                      template_kwargs);
  if (!prompt.ok()) {
    throw RequestError(400, fmt::format("the chat template rejected the request: {}",
                                        std::string(prompt.status().message())), "messages");
  }
  r.prompt = std::move(*prompt);
  CheckPromptBytes(ctx, r.prompt.size(), "messages");
  auto ids = ctx.codec->Encode(r.prompt, /*add_special_tokens=*/false);
  if (!ids.ok()) {
    throw RequestError(400, fmt::format("cannot tokenize the prompt: {}", std::string(ids.status().message())));
  }
  r.prompt_ids = std::move(*ids);
  r.starts_in_reasoning = add_generation_prompt && text::PromptOpensReasoning(r.prompt);
  if (ctx.prefix_cache) r.cache_points = ChatCachePoints(ctx, messages, tools, template_kwargs, r.prompt_ids);
  return r;
}

namespace {

Json LogprobEntry(const TextCodec& codec, int32_t id, float lp) {
  std::string tok = codec.TokenString(id);
  Json bytes = Json::array();
  for (unsigned char c : tok) bytes.push_back(static_cast<int>(c));
  return Json{{"token", tok}, {"logprob", JsonLogprob(lp)}, {"bytes", bytes}};
}

// Chat logprobs for tokens [begin, end) of a sample: {"content": [...]}.
Json ChatLogprobs(const TextCodec& codec, const SampleResult& r, size_t begin, size_t end, int top) {
  Json content = Json::array();
  for (size_t i = begin; i < end && i < r.logprobs.size(); ++i) {
    Json e = LogprobEntry(codec, r.logprobs[i].id, r.logprobs[i].logprob);
    Json tops = Json::array();
    if (i < r.top_logprobs.size()) {
      for (size_t k = 0; k < r.top_logprobs[i].size() && static_cast<int>(k) < top; ++k) {
        tops.push_back(LogprobEntry(codec, r.top_logprobs[i][k].id, r.top_logprobs[i][k].logprob));
      }
    }
    e["top_logprobs"] = std::move(tops);
    content.push_back(std::move(e));
  }
  return Json{{"content", std::move(content)}};
}

const char* ChatFinishReason(const SampleResult& r) {
  switch (r.finish) {
    case scheduler::FinishReason::kLength: return "length";
    case scheduler::FinishReason::kAbort: return "abort";
    case scheduler::FinishReason::kError: return "error";
    default: return r.tool_calls.empty() ? "stop" : "tool_calls";
  }
}

Json UsageJson(const Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

class ChatFormatter : public GenerationFormatter {
 public:
  ChatFormatter(const ServingContext& ctx, std::shared_ptr<ResponseChannel> channel, std::string id,
                bool stream, bool include_usage, bool logprobs, int top_logprobs, int n)
      : ctx_(ctx),
        channel_(std::move(channel)),
        id_(std::move(id)),
        created_(UnixNow()),
        stream_(stream),
        include_usage_(include_usage),
        logprobs_(logprobs),
        top_logprobs_(top_logprobs),
        n_(n),
        sent_logprobs_(static_cast<size_t>(n), 0) {}

  void Begin() override {
    channel_->StartStream(200, "text/event-stream");
    for (int i = 0; i < n_; ++i) {
      Json delta = {{"role", "assistant"}, {"content", ""}};
      Send(Chunk(i, std::move(delta), nullptr, nullptr));
    }
  }

  void Delta(int32_t index, const std::vector<OutputPiece>& pieces, const scheduler::TokenEvent& ev,
             const SampleResult& so_far) override {
    Json lp = nullptr;
    if (logprobs_ && so_far.logprobs.size() > sent_logprobs_[index]) {
      lp = ChatLogprobs(*ctx_.codec, so_far, sent_logprobs_[index], so_far.logprobs.size(), top_logprobs_);
      sent_logprobs_[index] = so_far.logprobs.size();
    }
    for (const auto& p : pieces) {
      Json delta = Json::object();
      switch (p.kind) {
        case OutputPiece::Kind::kContent: delta["content"] = p.text; break;
        case OutputPiece::Kind::kReasoning: delta["reasoning_content"] = p.text; break;
        case OutputPiece::Kind::kToolCallName: {
          const auto& call = so_far.tool_calls.at(p.tool_index);
          delta["tool_calls"] = Json::array({Json{{"index", p.tool_index}, {"id", call.id}, {"type", "function"},
                                                  {"function", {{"name", p.text}, {"arguments", ""}}}}});
          break;
        }
        case OutputPiece::Kind::kToolCallArguments:
          delta["tool_calls"] = Json::array({Json{{"index", p.tool_index}, {"function", {{"arguments", p.text}}}}});
          break;
      }
      Send(Chunk(index, std::move(delta), std::move(lp), nullptr));
      lp = nullptr;
    }
    if (!lp.is_null()) Send(Chunk(index, Json::object(), std::move(lp), nullptr));
  }

  void SampleFinished(int32_t index, const SampleResult& r) override {
    Json c = Chunk(index, Json::object(), nullptr, ChatFinishReason(r));
    c["choices"][0]["stop_reason"] = r.stop_string ? Json(*r.stop_string) : Json(nullptr);
    Send(c);
  }

  void Finished(const std::vector<SampleResult>& results, const Usage& usage) override {
    if (stream_) {
      if (include_usage_) {
        Json c = Base("chat.completion.chunk");
        c["choices"] = Json::array();
        c["usage"] = UsageJson(usage);
        Send(c);
      }
      channel_->Write("data: [DONE]\n\n");
      channel_->End();
      return;
    }
    Json body = Base("chat.completion");
    Json choices = Json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      const SampleResult& r = results[i];
      Json msg = {{"role", "assistant"}};
      msg["content"] = (r.content.empty() && !r.tool_calls.empty()) ? Json(nullptr) : Json(r.content);
      msg["reasoning_content"] = r.reasoning.empty() ? Json(nullptr) : Json(r.reasoning);
      if (!r.tool_calls.empty()) {
        Json calls = Json::array();
        for (const auto& c : r.tool_calls) {
          calls.push_back({{"id", c.id}, {"type", "function"},
                           {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        msg["tool_calls"] = std::move(calls);
      }
      Json choice = {{"index", i}, {"message", std::move(msg)}};
      choice["logprobs"] = logprobs_ ? ChatLogprobs(*ctx_.codec, r, 0, r.logprobs.size(), top_logprobs_)
                                     : Json(nullptr);
      choice["finish_reason"] = ChatFinishReason(r);
      choice["stop_reason"] = r.stop_string ? Json(*r.stop_string) : Json(nullptr);
      choices.push_back(std::move(choice));
    }
    body["choices"] = std::move(choices);
    body["usage"] = UsageJson(usage);
    channel_->Respond(HttpResponse{200, "application/json", {}, DumpJson(body)});
  }

  void Failed(const ApiError& e) override { SendOpenAiFailure(*channel_, stream_, e); }

 private:
  Json Base(const char* object) const {
    return Json{{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.model_name}};
  }
  Json Chunk(int32_t index, Json delta, Json logprobs, const char* finish) const {
    Json c = Base("chat.completion.chunk");
    Json choice = {{"index", index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)}};
    choice["finish_reason"] = finish ? Json(finish) : Json(nullptr);
    c["choices"] = Json::array({std::move(choice)});
    if (include_usage_) c["usage"] = nullptr;
    return c;
  }
  void Send(const Json& j) { channel_->Write(SseData(j)); }

  const ServingContext& ctx_;
  std::shared_ptr<ResponseChannel> channel_;
  std::string id_;
  int64_t created_;
  bool stream_;
  bool include_usage_;
  bool logprobs_;
  int top_logprobs_;
  int n_;
  std::vector<size_t> sent_logprobs_;
};

}  // namespace

void HandleChatCompletions(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                           std::shared_ptr<ResponseChannel> channel) {
  Json body = ParseJsonObject(req.body);
  CheckModelName(body, ctx);
  auto msgs_it = body.find("messages");
  if (msgs_it == body.end()) throw RequestError(400, "'messages' is required", "messages");
  Json messages = NormalizeChatMessages(*msgs_it);
  Json tools = NormalizeChatTools(body);

  ToolChoice tool_choice = ReadOpenAiToolChoice(body, tools);
  bool parse_tools = tool_choice.parses_tools(tools);

  Json kwargs = Json::object();
  if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
    if (!k->is_object()) throw RequestError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    kwargs = *k;
  }
  ApplyReasoningEffort(body, kwargs);
  bool add_generation_prompt = OptBool(body, "add_generation_prompt").value_or(true);
  bool continue_final = OptBool(body, "continue_final_message").value_or(false);
  if (add_generation_prompt && continue_final) {
    throw RequestError(400, "'continue_final_message' and 'add_generation_prompt' cannot both be true",
                       "continue_final_message");
  }
  if (tool_choice.forced() && !add_generation_prompt) {
    throw RequestError(400, "a forced tool_choice ('required' or a named function) needs 'add_generation_prompt'",
                       "tool_choice");
  }
  PrepareForcedToolChoice(ctx, tool_choice, kwargs);

  bool stream = OptBool(body, "stream").value_or(false);
  bool include_usage = false;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) throw RequestError(400, "'stream_options' must be an object", "stream_options");
    if (!stream) throw RequestError(400, "'stream_options' is only allowed with 'stream': true", "stream_options");
    include_usage = OptBool(*so, "include_usage").value_or(false);
  }
  bool logprobs = OptBool(body, "logprobs").value_or(false);
  int top_logprobs = static_cast<int>(OptIntIn(body, "top_logprobs", 0, 20).value_or(0));
  if (top_logprobs > 0 && !logprobs) {
    throw RequestError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
  }

  SamplingFields fields = ReadSamplingFields(body, ctx, {"max_completion_tokens", "max_tokens"});
  fields.sampling.logprobs = logprobs ? top_logprobs : -1;

  RenderedChat chat = RenderChatPrompt(ctx, messages, tools, add_generation_prompt, continue_final, kwargs);
  std::string forced_output = ForceToolCallStart(ctx, tool_choice, chat);  // usage counts it as prompt
  int32_t max_tokens = ResolveMaxTokens(ctx, chat.prompt_ids.size(), fields.max_tokens,
                                        body.contains("max_completion_tokens") ? "max_completion_tokens"
                                                                               : "max_tokens");
  GenerationSetup setup;
  setup.request = MakeEngineRequest(fields, std::move(chat.prompt_ids), max_tokens);
  setup.request.cache_points = std::move(chat.cache_points);
  setup.request.constraint = ChatOutputConstraint(ctx, body, tools, tool_choice, chat.starts_in_reasoning);
  setup.stop_strings = fields.stop_strings;
  setup.include_stop_str_in_output = fields.include_stop_str_in_output;
  setup.skip_special_tokens = fields.skip_special_tokens;
  setup.parse_output = true;
  setup.parser_options.starts_in_reasoning = chat.starts_in_reasoning;
  setup.parser_options.parse_tool_calls = parse_tools;
  setup.parser_options.tools = tools;
  setup.parser_options.forced_output = std::move(forced_output);
  setup.tool_id_prefix = "call_";
  setup.stream = stream;

  RequestInfo info{req.method, req.path, req.remote, "chatcmpl-" + RandomHex(32),
                   std::chrono::steady_clock::now()};
  auto formatter = std::make_unique<ChatFormatter>(ctx, channel, info.response_id, stream, include_usage,
                                                   logprobs, top_logprobs, fields.n);
  StartGeneration(ctx, metrics, std::move(channel), ApiFlavor::kOpenAi, std::move(setup),
                  std::move(formatter), std::move(info));
}

}  // namespace sparkserve::head::http
