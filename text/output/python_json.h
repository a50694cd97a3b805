// JSON text the way Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "
// separators, non-ASCII kept, keys in insertion order): the arguments format vLLM's tool parsers
// produce, so clients see the same strings from either server.
#pragma once
#include <string>

#include "nlohmann/json.hpp"

namespace sparkserve::text {

std::string DumpPythonStyleJson(const nlohmann::ordered_json& value);

}  // namespace sparkserve::text
