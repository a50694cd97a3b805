// A compiled Jinja2 template with Hugging Face's chat-template settings (trim_blocks,
// lstrip_blocks, loop controls, raise_exception, strftime_now, HF's tojson; jinja2's sandboxed,
// immutable semantics). The public entry point of the engine.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "text/chat/jinja/ast.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text::jinja {

// Bounds on one render, so that neither a template nor the data it loops over can make a render run,
// loop or grow without end. Exceeding one is a render error (InvalidArgument) naming it.
struct RenderLimits {
  int64_t max_loop_iterations = 1000000;            // for-loop bodies run, over the whole render
  size_t max_output_bytes = size_t{64} << 20;       // text emitted (set-blocks included)
  std::chrono::milliseconds max_render_time{10000};  // wall time
};

class Template {
 public:
  // Parses `source`. Errors (InvalidArgument) read "NAME:LINE:COLUMN: message". Unknown filters
  // and tests are errors only when evaluated, as in jinja2 3.x.
  static absl::StatusOr<std::shared_ptr<const Template>> Parse(std::string_view source, std::string name);

  // Renders with each key of `variables` (a JSON object) as a template variable. Every render
  // error is InvalidArgument "NAME:LINE:COLUMN: message"; one raised by raise_exception(msg) also
  // carries msg (see RaisedMessage).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& variables, const RenderLimits& limits = {}) const;
  absl::StatusOr<std::string> Render(const std::vector<std::pair<std::string, Value>>& variables,
                                     const RenderLimits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  Template(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  std::string name_;
  Body body_;
};

// The message a template passed to raise_exception, when `status` came from one.
std::optional<std::string> RaisedMessage(const absl::Status& status);

}  // namespace sparkserve::text::jinja
