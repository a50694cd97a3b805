// jinja_render_cases: renders many small templates in one process for the jinja2 comparison test
// (tests/e2e/test_jinja_engine.py). stdin: one JSON object per line {"template": "...",
// "context": {...}}; stdout: one line per case, {"output": "..."} or {"error": "...", "raised": msg|null}.
#include <iostream>
#include <string>

#include "text/chat/jinja/template.h"
#include "nlohmann/json.hpp"

int main() {
  using nlohmann::ordered_json;
  using sparkserve::text::jinja::RaisedMessage;
  using sparkserve::text::jinja::Template;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ordered_json result = ordered_json::object();
    ordered_json c = ordered_json::parse(line, nullptr, false);
    if (c.is_discarded() || !c.contains("template") || !c["template"].is_string()) {
      result["error"] = "bad case line";
      result["raised"] = nullptr;
    } else {
      auto tmpl = Template::Parse(c["template"].get<std::string>(), "case");
      absl::Status status = tmpl.status();
      if (tmpl.ok()) {
        auto out = (*tmpl)->Render(c.value("context", ordered_json::object()));
        if (out.ok()) result["output"] = *out;
        status = out.status();
      }
      if (!status.ok()) {
        result["error"] = std::string(status.message());
        auto raised = RaisedMessage(status);
        result["raised"] = raised ? ordered_json(*raised) : ordered_json(nullptr);
      }
    }
    std::cout << result.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << "\n";
  }
  return 0;
}
