// tool_choice parsing for both APIs and the forced start of a tool call.
#include "head/http/tool_choice.h"

#include "fmt/format.h"
#include "head/http/api_error.h"

namespace sparkserve::head::http {

namespace {

bool ToolNamed(const Json& tools, const std::string& name) {
  if (tools.is_null()) return false;
  for (const auto& t : tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

}  // namespace

ToolChoice ReadOpenAiToolChoice(const Json& body, const Json& tools) {
  ToolChoice c;
  auto tc = body.find("tool_choice");
  if (tc == body.end() || tc->is_null()) return c;
  if (tc->is_string()) {
    std::string choice = tc->get<std::string>();
    if (choice == "none") {
      c.mode = ToolChoice::Mode::kNone;
    } else if (choice == "required") {
      if (tools.is_null()) throw RequestError(400, "tool_choice 'required' needs 'tools'", "tool_choice");
      c.mode = ToolChoice::Mode::kRequired;
    } else if (choice != "auto") {
      throw RequestError(400, fmt::format("unknown tool_choice '{}' (none, auto, required, or a named function)",
                                          choice), "tool_choice");
    }
    return c;
  }
  if (!tc->is_object()) throw RequestError(400, "'tool_choice' must be a string or an object", "tool_choice");
  std::string name;
  if (tc->contains("function") && (*tc)["function"].is_object()) {
    const Json& fn = (*tc)["function"];
    if (auto n = fn.find("name"); n != fn.end() && n->is_string()) name = n->get<std::string>();
  }
  if (!ToolNamed(tools, name)) {
    throw RequestError(400, fmt::format("tool_choice names function '{}', which is not in 'tools'", name),
                       "tool_choice");
  }
  c.mode = ToolChoice::Mode::kNamed;
  c.name = std::move(name);
  return c;
}

ToolChoice ReadAnthropicToolChoice(const Json& body, const Json& tools) {
  ToolChoice c;
  auto tc = body.find("tool_choice");
  if (tc == body.end() || tc->is_null()) return c;
  if (!tc->is_object() || !tc->contains("type")) {
    throw RequestError(400, "tool_choice: must be an object with 'type'", "tool_choice");
  }
  std::string type = (*tc)["type"].is_string() ? (*tc)["type"].get<std::string>() : "";
  if (type == "none") {
    c.mode = ToolChoice::Mode::kNone;
  } else if (type == "auto") {
    c.mode = ToolChoice::Mode::kAuto;
  } else if (type == "any" || type == "tool") {
    if (tools.is_null()) throw RequestError(400, fmt::format("tool_choice '{}' needs 'tools'", type), "tool_choice");
    c.mode = ToolChoice::Mode::kRequired;
    if (type == "tool") {
      auto n = tc->find("name");
      std::string name = n != tc->end() && n->is_string() ? n->get<std::string>() : "";
      if (!ToolNamed(tools, name)) {
        throw RequestError(400, fmt::format("tool_choice names tool '{}', which is not in 'tools'", name),
                           "tool_choice");
      }
      c.mode = ToolChoice::Mode::kNamed;
      c.name = std::move(name);
    }
  } else {
    throw RequestError(400, fmt::format("tool_choice.type: unexpected value '{}'", type), "tool_choice");
  }
  return c;
}

std::string ForcedToolCallText(ToolCallMarkup markup, const ToolChoice& choice) {
  if (!choice.forced() || markup == ToolCallMarkup::kNone) return "";
  if (choice.mode == ToolChoice::Mode::kRequired) return "<tool_call>\n";
  if (markup == ToolCallMarkup::kQwenXml) return fmt::format("<tool_call>\n<function={}>\n", choice.name);
  // JSON form: the name as a JSON string (escapes included), as json.dumps writes it.
  return fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": ", Json(choice.name).dump());
}

void PrepareForcedToolChoice(const ServingContext& ctx, const ToolChoice& choice, Json& template_kwargs) {
  if (!choice.forced()) return;
  if (ctx.tool_call_markup == ToolCallMarkup::kNone) {
    throw RequestError(400, "this server's output parser has no tool-call format, so tool_choice cannot force "
                            "a call (serve with --output-parser qwen3 or qwen3_5)", "tool_choice");
  }
  template_kwargs["enable_thinking"] = false;
}

std::string ForceToolCallStart(const ServingContext& ctx, const ToolChoice& choice, RenderedChat& chat) {
  std::string text = ForcedToolCallText(ctx.tool_call_markup, choice);
  if (text.empty()) return "";
  // A template that ignored enable_thinking=false left <think> open: close it in the prompt too,
  // so the parser starts in content and sees only the call's start.
  std::string appended = chat.starts_in_reasoning ? "</think>\n\n" + text : text;
  chat.starts_in_reasoning = false;
  auto ids = ctx.codec->Encode(appended, /*add_special_tokens=*/false);
  if (!ids.ok()) {
    throw RequestError(400, fmt::format("cannot tokenize the forced tool call: {}",
                                        std::string(ids.status().message())), "tool_choice");
  }
  chat.prompt += appended;
  chat.prompt_ids.insert(chat.prompt_ids.end(), ids->begin(), ids->end());
  return text;
}

}  // namespace sparkserve::head::http
