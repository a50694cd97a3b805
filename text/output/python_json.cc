// DumpPythonStyleJson: a small recursive serialiser (nlohmann's dump has no separator options).
#include "text/output/python_json.h"

#include "fmt/format.h"

namespace sparkserve::text {
namespace {

void AppendString(const std::string& s, std::string& out) {
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

void Append(const nlohmann::ordered_json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        AppendString(key, out);
        out += ": ";
        Append(item, out);
      }
      out.push_back('}');
      break;
    }
    case nlohmann::ordered_json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        Append(item, out);
      }
      out.push_back(']');
      break;
    }
    case nlohmann::ordered_json::value_t::string:
      AppendString(v.get_ref<const std::string&>(), out);
      break;
    default:
      // Numbers (shortest round-trip form, as Python's repr), booleans and null.
      out += v.dump();
      break;
  }
}

}  // namespace

std::string DumpPythonStyleJson(const nlohmann::ordered_json& value) {
  std::string out;
  Append(value, out);
  return out;
}

}  // namespace sparkserve::text
