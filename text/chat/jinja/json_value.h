// JSON <-> template values: request JSON (key order kept) into Values, and Python's json.dumps
// (what Hugging Face's `tojson` filter calls) back out.
#pragma once
#include <optional>
#include <string>

#include "text/chat/jinja/value.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text::jinja {

Value FromJson(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=...): the per-level indent string
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Python json.dumps; throws a runtime error for values JSON cannot hold (undefined, callables).
std::string JsonDumps(const Value& v, const JsonDumpOptions& options);

}  // namespace sparkserve::text::jinja
