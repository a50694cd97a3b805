// ChatTemplate: loading a model's chat templates and rendering conversations like transformers.
#include "text/chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "text/chat/jinja/json_value.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr char kContinueTag[] = "CONTINUE_FINAL_MESSAGE_TAG ";

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot read {}", path.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A special token in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> TokenText(const ordered_json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Load(const fs::path& model_dir) {
  std::map<std::string, std::string> files;
  if (fs::exists(model_dir / "chat_template.jinja")) {
    ASSIGN_OR_RETURN(files["default"], ReadFile(model_dir / "chat_template.jinja"));
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir / "additional_chat_templates", ec)) {
    if (entry.path().extension() == ".jinja") {
      ASSIGN_OR_RETURN(files[entry.path().stem().string()], ReadFile(entry.path()));
    }
  }
  ordered_json config = ordered_json::object();
  if (fs::exists(model_dir / "tokenizer_config.json")) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(model_dir / "tokenizer_config.json"));
    config = ordered_json::parse(text, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", (model_dir / "tokenizer_config.json").string()));
    }
  }
  // The processor's legacy chat_template.json, used only when nothing else holds a template.
  if (files.empty() && !config.contains("chat_template") && fs::exists(model_dir / "chat_template.json")) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(model_dir / "chat_template.json"));
    ordered_json legacy = ordered_json::parse(text, nullptr, false);
    if (legacy.is_object() && legacy.contains("chat_template")) config["chat_template"] = legacy["chat_template"];
  }
  auto loaded = FromConfig(config, files);
  if (!loaded.ok()) return core::Annotate(loaded.status(), model_dir.string());
  return loaded;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromConfig(const ordered_json& config,
                                                      const std::map<std::string, std::string>& template_files) {
  std::map<std::string, std::string> sources = template_files;
  bool single = sources.size() == 1 && sources.count("default");
  if (sources.empty() && config.contains("chat_template")) {
    const ordered_json& ct = config["chat_template"];
    if (ct.is_string()) {
      sources["default"] = ct.get<std::string>();
      single = true;
    } else if (ct.is_array()) {
      for (const auto& t : ct) {
        if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
            !t["template"].is_string()) {
          return absl::InvalidArgumentError("tokenizer_config.json: chat_template list entries must be {name, template}");
        }
        sources[t["name"].get<std::string>()] = t["template"].get<std::string>();
      }
      single = false;
    } else if (!ct.is_null()) {
      return absl::InvalidArgumentError("tokenizer_config.json: chat_template must be a string or a list");
    }
  }
  if (sources.empty()) {
    return absl::NotFoundError(
        "no chat template (looked for chat_template.jinja, tokenizer_config.json's chat_template, chat_template.json)");
  }
  ChatTemplate out;
  out.single_ = single;
  for (const auto& [name, source] : sources) {
    ASSIGN_OR_RETURN(out.templates_[name], jinja::Template::Parse(source, fmt::format("chat_template[{}]", name)));
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (auto text = TokenText(config[key]); text && !text->empty()) out.special_tokens_.emplace_back(key, jinja::Value(*text));
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    jinja::ValueList extra;
    for (const auto& t : config["additional_special_tokens"]) {
      if (auto text = TokenText(t)) extra.emplace_back(*text);
    }
    if (!extra.empty()) out.special_tokens_.emplace_back("additional_special_tokens", jinja::Value::List(std::move(extra)));
  }
  return out;
}

std::vector<std::string> ChatTemplate::names() const {
  std::vector<std::string> out;
  for (const auto& entry : templates_) out.push_back(entry.first);
  return out;
}

absl::StatusOr<const jinja::Template*> ChatTemplate::Select(const std::string& name, bool has_tools) const {
  auto list_names = [&] {
    std::string s;
    for (const auto& entry : templates_) s += (s.empty() ? "" : ", ") + entry.first;
    return s;
  };
  if (!name.empty()) {
    auto it = templates_.find(name);
    if (it == templates_.end()) {
      return absl::InvalidArgumentError(fmt::format("no chat template named '{}' (available: {})", name, list_names()));
    }
    return it->second.get();
  }
  if (single_) return templates_.begin()->second.get();
  if (has_tools && templates_.count("tool_use")) return templates_.at("tool_use").get();
  if (templates_.count("default")) return templates_.at("default").get();
  return absl::InvalidArgumentError(fmt::format(
      "this model has several chat templates and none is named 'default'; name one (available: {})", list_names()));
}

absl::StatusOr<std::string> ChatTemplate::Render(const ordered_json& messages, const ordered_json& kwargs,
                                                 const ChatRenderOptions& options) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a JSON array");
  if (!kwargs.is_object()) return absl::InvalidArgumentError("chat template kwargs must be a JSON object");
  const bool has_tools = kwargs.contains("tools") && !kwargs["tools"].is_null();
  ASSIGN_OR_RETURN(const jinja::Template* tmpl, Select(options.template_name, has_tools));

  ordered_json chat = messages;
  std::string final_message;
  if (options.continue_final_message) {
    if (kwargs.contains("add_generation_prompt") && kwargs["add_generation_prompt"].is_boolean() &&
        kwargs["add_generation_prompt"].get<bool>()) {
      return absl::InvalidArgumentError(
          "continue_final_message and add_generation_prompt are not compatible: use continue_final_message to "
          "continue an existing final message, or add_generation_prompt to start a new one");
    }
    if (chat.empty() || !chat.back().is_object() || !chat.back().contains("content")) {
      return absl::InvalidArgumentError("continue_final_message is set but there is no final message content");
    }
    ordered_json& content = chat.back()["content"];
    if (content.is_string()) {
      final_message = content.get<std::string>();
      content = final_message + kContinueTag;
    } else if (content.is_array()) {
      bool found = false;
      for (auto it = content.rbegin(); it != content.rend() && !found; ++it) {
        if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
          final_message = (*it)["text"].get<std::string>();
          (*it)["text"] = final_message + kContinueTag;
          found = true;
        }
      }
      if (!found) {
        return absl::InvalidArgumentError(
            "continue_final_message is set but we could not find any text to continue in the final message");
      }
    } else {
      return absl::InvalidArgumentError("continue_final_message is set but the final message content is not text");
    }
  }

  std::vector<std::pair<std::string, jinja::Value>> vars = special_tokens_;
  vars.emplace_back("messages", jinja::FromJson(chat));
  vars.emplace_back("tools", jinja::Value::None());
  vars.emplace_back("documents", jinja::Value::None());
  vars.emplace_back("add_generation_prompt", jinja::Value(false));
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    if (it.key() == "messages") continue;
    vars.emplace_back(it.key(), jinja::FromJson(it.value()));
  }
  ASSIGN_OR_RETURN(std::string rendered, tmpl->Render(vars, options.limits));

  if (options.continue_final_message) {
    const std::string stripped = jinja::PyStrip(final_message, std::nullopt, true, true);
    const std::string tag = kContinueTag;
    const std::string tag_stripped = jinja::PyStrip(tag, std::nullopt, true, true);
    if (rendered.find(stripped) == std::string::npos || rendered.find(tag_stripped) == std::string::npos) {
      return absl::InvalidArgumentError(
          "continue_final_message is set but the final message does not appear in the chat after applying the chat "
          "template (the template may drop parts of the final message)");
    }
    const std::string cut = stripped == final_message ? tag : jinja::PyStrip(tag, std::nullopt, false, true);
    const size_t at = rendered.rfind(cut);
    if (at == std::string::npos) {
      // transformers fails here too (str.rindex): the template altered the text around the tag.
      return absl::InvalidArgumentError(
          "continue_final_message is set but the chat template changed the end of the final message");
    }
    rendered.resize(at);
  }
  return rendered;
}

}  // namespace sparkserve::text
