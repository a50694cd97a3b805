// A model's chat template(s), loaded and rendered the way Hugging Face transformers does:
// chat_template.jinja (+ additional_chat_templates/NAME.jinja) win over tokenizer_config.json's
// `chat_template` (a string, or a list of {name, template}); the special tokens of
// tokenizer_config.json (bos_token, eos_token, ...) are template variables; `tools` and
// `documents` default to None and `add_generation_prompt` to false; every other kwarg
// (enable_thinking, add_vision_id, any chat_template_kwargs) is passed through.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "text/chat/jinja/template.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text {

struct ChatRenderOptions {
  // A named template; empty: "tool_use" when tools are given and it exists, else "default".
  std::string template_name;
  // transformers' continue_final_message: the prompt ends inside the last message (no end-of-turn
  // after it), for prefilling an assistant reply. Incompatible with add_generation_prompt.
  bool continue_final_message = false;
  // Bounds on the render (loop iterations, output bytes, time); each one's error is InvalidArgument.
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // From a model directory (see the file comment for the lookup order).
  static absl::StatusOr<ChatTemplate> Load(const std::filesystem::path& model_dir);
  // From a parsed tokenizer_config.json and the template files found beside it (name -> source;
  // "default" for chat_template.jinja), which win over the config's templates when not empty.
  static absl::StatusOr<ChatTemplate> FromConfig(const nlohmann::ordered_json& tokenizer_config,
                                                 const std::map<std::string, std::string>& template_files);

  // Renders `messages` (a JSON array of messages) with `kwargs` (a JSON object of template
  // variables). Template errors, including raise_exception, are InvalidArgument (the HTTP layer's
  // 400); jinja::RaisedMessage(status) gives the raised message.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& kwargs,
                                     const ChatRenderOptions& options = {}) const;

  std::vector<std::string> names() const;  // "default" for a single template
  // The special-token variables (bos_token, eos_token, ..., additional_special_tokens).
  const std::vector<std::pair<std::string, jinja::Value>>& special_tokens() const { return special_tokens_; }

 private:
  absl::StatusOr<const jinja::Template*> Select(const std::string& name, bool has_tools) const;

  bool single_ = true;
  std::map<std::string, std::shared_ptr<const jinja::Template>> templates_;
  std::vector<std::pair<std::string, jinja::Value>> special_tokens_;
};

}  // namespace sparkserve::text
