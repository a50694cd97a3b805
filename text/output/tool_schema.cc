// ToolSchemas lookup and schema-typed conversion of XML tool-call parameter values.
#include "text/output/tool_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "text/output/json_nesting.h"
#include "fmt/format.h"

namespace sparkserve::text {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsPythonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::string_view StripSpace(std::string_view s) {
  while (!s.empty() && IsPythonSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsPythonSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Python int(text) for base-10 text: whitespace, one sign, digits with single underscores between
// them. nullopt when the text is not an integer or does not fit 64 bits.
std::optional<ordered_json> ParsePythonInt(std::string_view text) {
  std::string_view s = StripSpace(text);
  bool negative = false;
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (s[i - 1] == '_') return std::nullopt;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    digits.push_back(c);
  }
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (!negative) {
    if (magnitude <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ordered_json(static_cast<int64_t>(magnitude));
    }
    return ordered_json(magnitude);
  }
  constexpr uint64_t kMinMagnitude = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1;
  if (magnitude > kMinMagnitude) return std::nullopt;
  if (magnitude == kMinMagnitude) return ordered_json(std::numeric_limits<int64_t>::min());
  return ordered_json(-static_cast<int64_t>(magnitude));
}

// Python float(text), integral results as integers (vLLM: `f if f - int(f) != 0 else int(f)`).
// Non-finite values are refused (JSON has no inf/nan).
std::optional<ordered_json> ParsePythonNumber(std::string_view text) {
  std::string_view s = StripSpace(text);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, std::chars_format::general);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (std::trunc(value) == value && value >= -kTwo63 && value < kTwo63) {
    return ordered_json(static_cast<int64_t>(value));
  }
  return ordered_json(value);
}

std::optional<ordered_json> ParseJson(std::string_view text) {
  if (JsonNestingDepth(text) > kMaxJsonNesting) return std::nullopt;  // kept as text
  ordered_json parsed = ordered_json::parse(text.begin(), text.end(), nullptr,
                                            /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

struct DeclaredType {
  std::string name;  // lower-cased primary (first non-null) type; "string" when none is given
  bool has_type = false;
  bool allows_null = false;
};

DeclaredType ReadDeclaredType(const nlohmann::json& schema) {
  DeclaredType t{.name = "string"};
  if (!schema.is_object()) return t;
  auto take = [&t](const nlohmann::json& type) {
    if (!type.is_string()) return;
    std::string name = Lower(type.get<std::string>());
    if (name == "null") {
      t.allows_null = true;
    } else if (!t.has_type) {
      t.name = name;
      t.has_type = true;
    }
  };
  if (auto it = schema.find("type"); it != schema.end()) {
    if (it->is_array()) {
      for (const auto& type : *it) take(type);
    } else {
      take(*it);
    }
    if (!t.has_type && t.allows_null) t.name = "null";
    t.has_type = true;
    return t;
  }
  if (auto it = schema.find("anyOf"); it != schema.end() && it->is_array()) {
    for (const auto& option : *it) {
      if (option.is_object() && option.contains("type")) take(option["type"]);
    }
    t.has_type = true;
  }
  return t;
}

bool StartsWith(const std::string& s, std::string_view prefix) { return s.starts_with(prefix); }

}  // namespace

absl::StatusOr<ToolSchemas> ToolSchemas::FromTools(const nlohmann::json& tools) {
  ToolSchemas schemas;
  if (tools.is_null()) return schemas;
  if (!tools.is_array()) return absl::InvalidArgumentError("tools must be an array");
  std::map<std::string, nlohmann::json, std::less<>> all;
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& tool = tools[i];
    if (!tool.is_object()) {
      return absl::InvalidArgumentError(fmt::format("tools[{}] must be an object", i));
    }
    const nlohmann::json* function = &tool;
    const char* parameters_key = "input_schema";  // Anthropic
    if (auto it = tool.find("function"); it != tool.end()) {
      if (!it->is_object()) {
        return absl::InvalidArgumentError(fmt::format("tools[{}].function must be an object", i));
      }
      function = &*it;
      parameters_key = "parameters";
    }
    auto name = function->find("name");
    if (name == function->end() || !name->is_string() || name->get<std::string>().empty()) {
      return absl::InvalidArgumentError(fmt::format("tools[{}] has no function name", i));
    }
    nlohmann::json properties = nlohmann::json::object();
    if (auto params = function->find(parameters_key);
        params != function->end() && params->is_object()) {
      if (auto props = params->find("properties"); props != params->end() && props->is_object()) {
        properties = *props;
      }
    }
    all[name->get<std::string>()] = std::move(properties);
  }
  schemas.properties_ = std::make_shared<const std::map<std::string, nlohmann::json, std::less<>>>(std::move(all));
  return schemas;
}

const nlohmann::json* ToolSchemas::Properties(std::string_view function) const {
  if (!properties_) return nullptr;
  auto it = properties_->find(function);
  if (it == properties_->end() || it->second.empty()) return nullptr;
  return &it->second;
}

nlohmann::ordered_json ConvertParameterValue(std::string_view text,
                                             const nlohmann::json* property_schema) {
  ordered_json as_text = std::string(text);
  if (property_schema == nullptr) return as_text;
  DeclaredType type = ReadDeclaredType(*property_schema);
  std::string lower = Lower(text);
  bool is_null_text = lower == "null" || lower == "none";
  if (type.allows_null && is_null_text) return nullptr;
  const std::string& t = type.name;
  if (t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum") {
    return as_text;
  }
  if (is_null_text) return nullptr;
  if (StartsWith(t, "int") || StartsWith(t, "uint") || StartsWith(t, "long") ||
      StartsWith(t, "short") || StartsWith(t, "unsigned")) {
    return ParsePythonInt(text).value_or(as_text);
  }
  if (StartsWith(t, "num") || StartsWith(t, "float")) {
    return ParsePythonNumber(text).value_or(as_text);
  }
  if (t == "boolean" || t == "bool" || t == "binary") {
    if (lower == "true") return true;
    if (lower == "false") return false;
    return as_text;
  }
  bool container = t == "object" || t == "array" || t == "arr" || StartsWith(t, "dict") ||
                   StartsWith(t, "list");
  std::optional<ordered_json> parsed = ParseJson(text);
  if (!parsed) return as_text;
  if (container && parsed->is_string()) {
    // A JSON-encoded JSON document ("\"{\\\"a\\\": 1}\""): decode the inner one too.
    if (std::optional<ordered_json> inner = ParseJson(parsed->get<std::string>())) return *inner;
  }
  return *parsed;
}

}  // namespace sparkserve::text
