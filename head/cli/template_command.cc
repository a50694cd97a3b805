// `sparkserve template MODEL_DIR --request FILE.json`: renders a conversation with the model's chat
// template and prints exactly the prompt (no newline added). The request file holds
// {"messages": [...], ...}; every other key is a template kwarg (tools, add_generation_prompt,
// enable_thinking, ...), except `chat_template` (a template name) and `continue_final_message`,
// which transformers' apply_chat_template consumes itself. Errors: message on stderr, exit 1.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "text/chat/chat_template.h"
#include "head/cli/model_path.h"
#include "head/cli/commands.h"

namespace sparkserve::head {
namespace {

int RunTemplate(const std::string& model_dir, const std::string& request_path) {
  std::ifstream in(request_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "error: cannot read %s\n", request_path.c_str());
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("messages")) {
    std::fprintf(stderr, "error: %s: expected a JSON object with \"messages\"\n", request_path.c_str());
    return 1;
  }
  text::ChatRenderOptions options;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  for (auto it = request.begin(); it != request.end(); ++it) {
    if (it.key() == "messages") continue;
    if (it.key() == "chat_template" && it.value().is_string()) {
      options.template_name = it.value().get<std::string>();
    } else if (it.key() == "continue_final_message") {
      options.continue_final_message = it.value().is_boolean() && it.value().get<bool>();
    } else {
      kwargs[it.key()] = it.value();
    }
  }
  auto tmpl = text::ChatTemplate::Load(model_dir);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(tmpl.status().message()).c_str());
    return 1;
  }
  auto rendered = tmpl->Render(request["messages"], kwargs, options);
  if (!rendered.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(rendered.status().message()).c_str());
    return 1;
  }
  std::fwrite(rendered->data(), 1, rendered->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void AddTemplateCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("template", "render a conversation with a model's chat template");
  auto model_dir = std::make_shared<std::string>();
  auto request = std::make_shared<std::string>();
  AcceptModelPath(cmd, cmd->add_option("model_dir", *model_dir, "model directory (tokenizer_config.json / chat_template.jinja), packed model file or GGUF file")->required(),
                  model_dir.get());
  cmd->add_option("--request", *request, "JSON file: {\"messages\": [...], other keys are template kwargs}")->required();
  cmd->callback([exit_code, model_dir, request] { *exit_code = RunTemplate(*model_dir, *request); });
}

}  // namespace sparkserve::head
