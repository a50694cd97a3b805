// Anthropic Messages API: request conversion, the message response and its SSE event stream.
#include "head/http/anthropic_messages.h"

#include "fmt/format.h"
#include "head/http/api_error.h"
#include "head/http/generation.h"
#include "head/http/openai_chat.h"
#include "head/http/sampling_fields.h"
#include "head/http/structured_output.h"
#include "head/http/tool_choice.h"

namespace sparkserve::head::http {

namespace {

// The text of a system prompt or tool_result content: a string or an array of text blocks.
std::string TextOfBlocks(const Json& v, const char* where) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw RequestError(400, fmt::format("{} must be a string or an array of text blocks", where));
  std::string text;
  for (const auto& b : v) {
    std::string type = b.is_object() ? StringOr(b, "type", "", where) : "";
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      text += b["text"].get<std::string>();
    } else if (type == "image" || type == "document") {
      throw RequestError(400, "images are not supported yet");
    } else {
      throw RequestError(400, fmt::format("{}: unsupported block type '{}'", where, type));
    }
  }
  return text;
}

}  // namespace

Json AnthropicToChatMessages(const Json& body) {
  Json out = Json::array();
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null()) {
    out.push_back({{"role", "system"}, {"content", TextOfBlocks(*sys, "'system'")}});
  }
  auto msgs = body.find("messages");
  if (msgs == body.end()) throw RequestError(400, "messages: field required", "messages");
  if (!msgs->is_array()) throw RequestError(400, "messages: must be an array", "messages");
  if (msgs->empty()) throw RequestError(400, "messages: at least one message is required", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    if (!m.is_object()) throw RequestError(400, fmt::format("messages.{}: must be an object", i), "messages");
    std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
    if (role != "user" && role != "assistant") {
      throw RequestError(400, fmt::format("messages.{}.role: unexpected role '{}' (user or assistant; the system "
                                          "prompt goes in the top-level 'system' field)", i, role), "messages");
    }
    auto content = m.find("content");
    if (content == m.end()) throw RequestError(400, fmt::format("messages.{}.content: field required", i), "messages");
    if (content->is_string()) {
      out.push_back({{"role", role}, {"content", *content}});
      continue;
    }
    if (!content->is_array()) {
      throw RequestError(400, fmt::format("messages.{}.content: must be a string or an array of blocks", i), "messages");
    }
    std::string text, reasoning;
    bool has_text = false;
    Json tool_calls = Json::array();
    auto flush_user_text = [&] {
      if (has_text) out.push_back({{"role", "user"}, {"content", text}});
      text.clear();
      has_text = false;
    };
    const std::string where = fmt::format("messages.{}.content[]", i);
    for (const auto& b : *content) {
      std::string type = b.is_object() ? StringOr(b, "type", "", where) : "";
      if (type == "text") {
        if (!b.contains("text") || !b["text"].is_string()) {
          throw RequestError(400, fmt::format("messages.{}: a text block needs a string 'text'", i), "messages");
        }
        text += b["text"].get<std::string>();
        has_text = true;
      } else if (type == "image" || type == "document") {
        throw RequestError(400, "images are not supported yet", "messages");
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("name") || !b["name"].is_string()) {
          throw RequestError(400, fmt::format("messages.{}: tool_use needs a string 'name'", i), "messages");
        }
        Json input = b.contains("input") && b["input"].is_object() ? b["input"] : Json::object();
        tool_calls.push_back({{"id", StringOr(b, "id", "", where)}, {"type", "function"},
                              {"function", {{"name", b["name"]}, {"arguments", input}}}});
      } else if (type == "tool_result" && role == "user") {
        flush_user_text();
        std::string result = TextOfBlocks(b.contains("content") ? b["content"] : Json(nullptr),
                                          "tool_result content");
        out.push_back({{"role", "tool"}, {"tool_call_id", StringOr(b, "tool_use_id", "", where)}, {"content", result}});
      } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
        if (type == "thinking" && b.contains("thinking") && b["thinking"].is_string()) {
          reasoning += b["thinking"].get<std::string>();
        }
      } else {
        throw RequestError(400, fmt::format("messages.{}: unsupported content block type '{}' for role {}", i, type,
                                            role), "messages");
      }
    }
    if (role == "user") {
      flush_user_text();
    } else {
      Json msg = {{"role", "assistant"}, {"content", text}};
      if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
      if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
      out.push_back(std::move(msg));
    }
  }
  return out;
}

Json AnthropicToChatTools(const Json& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw RequestError(400, "tools: must be an array", "tools");
  if (it->empty()) return nullptr;
  Json out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      throw RequestError(400, "tools: each tool needs a string 'name'", "tools");
    }
    auto desc = t.find("description");
    auto schema = t.find("input_schema");
    if (schema != t.end() && !schema->is_object()) {
      throw RequestError(400, fmt::format("tools.{}.input_schema: must be a JSON Schema object", i), "tools");
    }
    CheckToolDefinition(t["name"], desc == t.end() ? nullptr : &*desc, schema == t.end() ? nullptr : &*schema,
                        "input_schema", fmt::format("tools.{}", i), "tools");
    if (t.contains("type") && t["type"].is_string() && t["type"] != "custom") {
      throw RequestError(400, fmt::format("tools: server tool type '{}' is not supported",
                                          t["type"].get<std::string>()), "tools");
    }
    Json fn = {{"name", t["name"]}};
    if (t.contains("description")) fn["description"] = t["description"];
    fn["parameters"] = t.contains("input_schema") ? t["input_schema"] : Json{{"type", "object"}};
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

Json AnthropicTemplateKwargs(const Json& body) {
  bool thinking = false;
  if (auto t = body.find("thinking"); t != body.end() && !t->is_null()) {
    if (!t->is_object() || !t->contains("type") || !(*t)["type"].is_string()) {
      throw RequestError(400, "thinking: must be {\"type\": \"enabled\", ...} or {\"type\": \"disabled\"}", "thinking");
    }
    std::string type = (*t)["type"].get<std::string>();
    if (type != "enabled" && type != "adaptive" && type != "disabled") {
      throw RequestError(400, fmt::format("thinking.type: unexpected value '{}'", type), "thinking");
    }
    thinking = type != "disabled";  // adaptive: the model decides how much; Qwen thinks when allowed
  }
  return Json{{"enable_thinking", thinking}};
}

namespace {

// The model's tool-call arguments as an object ({} when they are not one, or not JSON we accept).
Json ToolInput(const std::string& arguments) {
  if (arguments.empty()) return Json::object();
  try {
    Json j = ParseJsonField(arguments, "tool arguments", "");
    if (j.is_object()) return j;
  } catch (const RequestError&) {
  }
  return Json::object();
}

const char* StopReason(const SampleResult& r) {
  if (r.stop_string) return "stop_sequence";
  switch (r.finish) {
    case scheduler::FinishReason::kLength: return "max_tokens";
    default: return r.tool_calls.empty() ? "end_turn" : "tool_use";
  }
}

class MessagesFormatter : public GenerationFormatter {
 public:
  MessagesFormatter(const ServingContext& ctx, std::shared_ptr<ResponseChannel> channel, std::string id,
                    bool stream, int64_t input_tokens)
      : ctx_(ctx), channel_(std::move(channel)), id_(std::move(id)), stream_(stream), input_tokens_(input_tokens) {}

  void Begin() override {
    channel_->StartStream(200, "text/event-stream");
    Json msg = Message();
    msg["content"] = Json::array();
    msg["stop_reason"] = nullptr;
    msg["stop_sequence"] = nullptr;
    msg["usage"] = {{"input_tokens", input_tokens_}, {"output_tokens", 0}};
    Send("message_start", {{"type", "message_start"}, {"message", msg}});
    Send("ping", {{"type", "ping"}});
  }

  void Delta(int32_t, const std::vector<OutputPiece>& pieces, const scheduler::TokenEvent&,
             const SampleResult& so_far) override {
    for (const auto& p : pieces) {
      switch (p.kind) {
        case OutputPiece::Kind::kContent:
          Open(BlockKind::kText, 0, so_far);
          Send("content_block_delta", Delta(Json{{"type", "text_delta"}, {"text", p.text}}));
          break;
        case OutputPiece::Kind::kReasoning:
          Open(BlockKind::kThinking, 0, so_far);
          Send("content_block_delta", Delta(Json{{"type", "thinking_delta"}, {"thinking", p.text}}));
          break;
        case OutputPiece::Kind::kToolCallName:
          CloseBlock();
          Open(BlockKind::kToolUse, p.tool_index, so_far);
          break;
        case OutputPiece::Kind::kToolCallArguments:
          Open(BlockKind::kToolUse, p.tool_index, so_far);
          Send("content_block_delta", Delta(Json{{"type", "input_json_delta"}, {"partial_json", p.text}}));
          break;
      }
    }
  }

  void Finished(const std::vector<SampleResult>& results, const Usage& usage) override {
    const SampleResult& r = results.at(0);
    if (stream_) {
      CloseBlock();
      Send("message_delta", {{"type", "message_delta"},
                             {"delta", {{"stop_reason", StopReason(r)},
                                        {"stop_sequence", r.stop_string ? Json(*r.stop_string) : Json(nullptr)}}},
                             {"usage", UsageJson(usage)}});
      Send("message_stop", {{"type", "message_stop"}});
      channel_->End();
      return;
    }
    Json content = Json::array();
    for (const auto& p : r.pieces) {
      switch (p.kind) {
        case OutputPiece::Kind::kContent: content.push_back({{"type", "text"}, {"text", p.text}}); break;
        case OutputPiece::Kind::kReasoning:
          content.push_back({{"type", "thinking"}, {"thinking", p.text}, {"signature", ""}});
          break;
        case OutputPiece::Kind::kToolCallName: {
          const auto& call = r.tool_calls.at(p.tool_index);
          content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name},
                             {"input", ToolInput(call.arguments)}});
          break;
        }
        case OutputPiece::Kind::kToolCallArguments: break;
      }
    }
    Json msg = Message();
    msg["content"] = std::move(content);
    msg["stop_reason"] = StopReason(r);
    msg["stop_sequence"] = r.stop_string ? Json(*r.stop_string) : Json(nullptr);
    msg["usage"] = UsageJson(usage);
    channel_->Respond(HttpResponse{200, "application/json", {}, DumpJson(msg)});
  }

  // input_tokens counts the whole prompt (as it did before the prefix cache, and as count_tokens
  // does); cache_read_input_tokens says how many of them the prefix cache held.
  static Json UsageJson(const Usage& u) {
    return {{"input_tokens", u.prompt_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", u.cached_tokens},
            {"output_tokens", u.completion_tokens}};
  }

  void Failed(const ApiError& e) override {
    if (stream_) {
      channel_->Write(fmt::format("event: error\ndata: {}\n\n", AnthropicErrorJson(e)));
      channel_->End();
    } else {
      channel_->Respond(ErrorResponse(ApiFlavor::kAnthropic, e));
    }
  }

 private:
  enum class BlockKind { kNone, kText, kThinking, kToolUse };

  Json Message() const {
    return Json{{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", ctx_.model_name}};
  }
  Json Delta(Json delta) const {
    return Json{{"type", "content_block_delta"}, {"index", block_index_}, {"delta", std::move(delta)}};
  }
  void Open(BlockKind kind, int32_t tool_index, const SampleResult& so_far) {
    if (open_ == kind && (kind != BlockKind::kToolUse || open_tool_ == tool_index)) return;
    CloseBlock();
    ++block_index_;
    open_ = kind;
    open_tool_ = tool_index;
    Json block;
    if (kind == BlockKind::kText) {
      block = {{"type", "text"}, {"text", ""}};
    } else if (kind == BlockKind::kThinking) {
      block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    } else {
      const auto& call = so_far.tool_calls.at(tool_index);
      block = {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", Json::object()}};
    }
    Send("content_block_start", {{"type", "content_block_start"}, {"index", block_index_}, {"content_block", block}});
  }
  void CloseBlock() {
    if (open_ == BlockKind::kNone) return;
    Send("content_block_stop", {{"type", "content_block_stop"}, {"index", block_index_}});
    open_ = BlockKind::kNone;
  }
  void Send(const char* event, const Json& data) { channel_->Write(SseEvent(event, data)); }

  const ServingContext& ctx_;
  std::shared_ptr<ResponseChannel> channel_;
  std::string id_;
  bool stream_;
  int64_t input_tokens_;
  BlockKind open_ = BlockKind::kNone;
  int32_t open_tool_ = -1;
  int block_index_ = -1;
};

}  // namespace

void HandleMessages(const ServingContext& ctx, ServingMetrics* metrics, const HttpRequest& req,
                    std::shared_ptr<ResponseChannel> channel) {
  Json body = ParseJsonObject(req.body);
  CheckModelName(body, ctx);
  auto max_tokens = OptInt(body, "max_tokens");
  if (!max_tokens) throw RequestError(400, "max_tokens: field required", "max_tokens");
  if (*max_tokens < 1) throw RequestError(400, "max_tokens: must be at least 1", "max_tokens");
  Json messages = AnthropicToChatMessages(body);
  Json tools = AnthropicToChatTools(body);
  ToolChoice tool_choice = ReadAnthropicToolChoice(body, tools);
  Json kwargs = AnthropicTemplateKwargs(body);
  PrepareForcedToolChoice(ctx, tool_choice, kwargs);
  bool stream = OptBool(body, "stream").value_or(false);

  // Only the Anthropic sampling fields (and ignore_eos, the extension the OpenAI side takes too, for
  // benchmarks and tests); the rest of the body is ignored like any unknown field.
  Json sampling = Json::object();
  for (const char* key : {"temperature", "top_p", "top_k", "ignore_eos"}) {
    if (body.contains(key)) sampling[key] = body[key];
  }
  if (auto t = OptNumber(body, "temperature"); t && (*t < 0.0 || *t > 1.0)) {
    throw RequestError(400, "temperature: must be between 0 and 1", "temperature");
  }
  SamplingFields fields = ReadSamplingFields(sampling, ctx, {});
  fields.stop_strings = ReadStopStrings(body, "stop_sequences", ctx);

  RenderedChat chat = RenderChatPrompt(ctx, messages, tools, true, false, kwargs);
  std::string forced_output = ForceToolCallStart(ctx, tool_choice, chat);  // counted in input_tokens
  int64_t input_tokens = static_cast<int64_t>(chat.prompt_ids.size());
  int32_t resolved = ResolveMaxTokens(ctx, chat.prompt_ids.size(), max_tokens, "max_tokens");

  GenerationSetup setup;
  setup.request = MakeEngineRequest(fields, std::move(chat.prompt_ids), resolved);
  setup.request.cache_points = std::move(chat.cache_points);
  // A forced tool (tool_choice any / tool) follows its input_schema.
  const bool one_call = body.contains("tool_choice") && body["tool_choice"].is_object() &&
                        body["tool_choice"].value("disable_parallel_tool_use", false);
  setup.request.constraint = ForcedToolCallConstraint(ctx, tools, tool_choice, !one_call);
  setup.stop_strings = fields.stop_strings;
  setup.parse_output = true;
  setup.parser_options.starts_in_reasoning = chat.starts_in_reasoning;
  setup.parser_options.parse_tool_calls = tool_choice.parses_tools(tools);
  setup.parser_options.tools = tools;
  setup.parser_options.forced_output = std::move(forced_output);
  setup.tool_id_prefix = "toolu_";
  setup.stream = stream;
  RequestInfo info{req.method, req.path, req.remote, "msg_" + RandomHex(24), std::chrono::steady_clock::now()};
  auto formatter = std::make_unique<MessagesFormatter>(ctx, channel, info.response_id, stream, input_tokens);
  StartGeneration(ctx, metrics, std::move(channel), ApiFlavor::kAnthropic, std::move(setup), std::move(formatter),
                  std::move(info));
}

Json CountTokens(const ServingContext& ctx, const HttpRequest& req) {
  Json body = ParseJsonObject(req.body);
  CheckModelName(body, ctx);
  Json messages = AnthropicToChatMessages(body);
  Json tools = AnthropicToChatTools(body);
  ToolChoice tool_choice = ReadAnthropicToolChoice(body, tools);
  Json kwargs = AnthropicTemplateKwargs(body);
  PrepareForcedToolChoice(ctx, tool_choice, kwargs);
  RenderedChat chat = RenderChatPrompt(ctx, messages, tools, true, false, kwargs);
  ForceToolCallStart(ctx, tool_choice, chat);  // the same count /v1/messages reports
  return Json{{"input_tokens", chat.prompt_ids.size()}};
}

}  // namespace sparkserve::head::http
