// libFuzzer target for the Jinja engine: input = template source, a NUL byte, then the render
// variables as JSON. Any input must parse or fail with a positioned error, and a render must end
// (within the limits below) with text or an error; never a crash, hang or sanitizer report.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nlohmann/json.hpp"
#include "text/chat/jinja/template.h"
#include "text/output/json_nesting.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparkserve::text;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view source = in.substr(0, nul);
  const std::string_view vars_text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  auto tmpl = jinja::Template::Parse(source, "fuzz");
  if (!tmpl.ok()) {
    if (tmpl.status().message().empty()) std::abort();  // errors say what is wrong
    return 0;
  }
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (!vars_text.empty() && JsonNestingDepth(vars_text) <= kMaxJsonNesting) {
    auto parsed = nlohmann::ordered_json::parse(vars_text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) vars = std::move(parsed);
  }
  jinja::RenderLimits limits;
  limits.max_loop_iterations = 20000;
  limits.max_output_bytes = 1 << 20;
  limits.max_render_time = std::chrono::milliseconds(2000);
  auto out = (*tmpl)->Render(vars, limits);
  if (out.ok() && out->size() > limits.max_output_bytes) std::abort();  // the output limit held
  if (!out.ok() && out.status().message().empty()) std::abort();
  return 0;
}
