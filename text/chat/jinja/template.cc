// Template: parse (lex + parse + name checks) and render, turning TemplateError into absl::Status.
#include "text/chat/jinja/template.h"

#include "absl/strings/cord.h"
#include "fmt/format.h"
#include "text/chat/jinja/evaluator.h"
#include "text/chat/jinja/json_value.h"
#include "text/chat/jinja/lexer.h"
#include "text/chat/jinja/parser.h"

namespace sparkserve::text::jinja {
namespace {

constexpr char kRaisedPayload[] = "sparkserve.chat.jinja/raise_exception";

absl::Status ToStatus(const std::string& template_name, const TemplateError& e) {
  std::string where = e.has_pos() ? fmt::format("{}:{}:{}", template_name, e.pos().line, e.pos().column) : template_name;
  std::string text = e.kind() == ErrorKind::kRaised ? fmt::format("{}: raise_exception: {}", where, e.message())
                                                     : fmt::format("{}: {}", where, e.message());
  absl::Status status = absl::InvalidArgumentError(text);
  if (e.kind() == ErrorKind::kRaised) status.SetPayload(kRaisedPayload, absl::Cord(e.message()));
  return status;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Template>> Template::Parse(std::string_view source, std::string name) {
  try {
    Body body = jinja::Parse(Tokenize(source));
    return std::shared_ptr<const Template>(new Template(std::move(name), std::move(body)));
  } catch (const TemplateError& e) {
    return ToStatus(name, e);
  }
}

absl::StatusOr<std::string> Template::Render(const std::vector<std::pair<std::string, Value>>& variables,
                                            const RenderLimits& limits) const {
  auto root = std::make_shared<Scope>();
  AddBuiltinGlobals(*root);
  for (const auto& [k, v] : variables) root->Set(k, v);
  try {
    Evaluator evaluator(limits);
    return evaluator.Render(body_, root);
  } catch (const TemplateError& e) {
    return ToStatus(name_, e);
  }
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& variables,
                                            const RenderLimits& limits) const {
  if (!variables.is_object()) return absl::InvalidArgumentError("template variables must be a JSON object");
  std::vector<std::pair<std::string, Value>> vars;
  for (auto it = variables.begin(); it != variables.end(); ++it) vars.emplace_back(it.key(), FromJson(it.value()));
  return Render(vars, limits);
}

std::optional<std::string> RaisedMessage(const absl::Status& status) {
  auto payload = status.GetPayload(kRaisedPayload);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace sparkserve::text::jinja
