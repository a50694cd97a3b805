// JSON <-> template values (see json_value.h).
#include "text/chat/jinja/json_value.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(FromJson(x));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictData>();
      d->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d->entries.emplace_back(Value(it.key()), FromJson(it.value()));
      return Value::Dict(d);
    }
    default:
      return Value::None();
  }
}

namespace {

void DumpString(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t c : DecodeUtf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
          }
        } else {
          AppendUtf8(out, c);
        }
    }
  }
  out += '"';
}

std::string DumpFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FormatFloat(d);
}

// A dict key as json.dumps writes it.
std::string KeyText(const Value& k) {
  switch (k.kind()) {
    case Kind::kString: return k.str();
    case Kind::kBool: return k.as_bool() ? "true" : "false";
    case Kind::kInt: return std::to_string(k.as_int());
    case Kind::kFloat: return DumpFloat(k.as_double());
    case Kind::kNone: return "null";
    default:
      ThrowRuntime(fmt::format("keys must be str, int, float, bool or None, not {}", k.TypeName()));
  }
}

void Dump(const Value& v, const JsonDumpOptions& o, int level, std::string& out) {
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Kind::kNone: out += "null"; return;
    case Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::kInt: out += std::to_string(v.as_int()); return;
    case Kind::kFloat: out += DumpFloat(v.as_double()); return;
    case Kind::kString: DumpString(v.str(), o.ensure_ascii, out); return;
    case Kind::kList:
    case Kind::kTuple: {
      const auto& xs = v.items();
      if (xs.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) newline(level + 1);
        Dump(xs[i], o, level + 1, out);
      }
      if (o.indent) newline(level);
      out += ']';
      return;
    }
    case Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.dict().entries) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return PyLess(a->first, b->first); });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        if (o.indent) newline(level + 1);
        DumpString(KeyText(entries[i]->first), o.ensure_ascii, out);
        out += o.key_separator;
        Dump(entries[i]->second, o, level + 1, out);
      }
      if (o.indent) newline(level);
      out += '}';
      return;
    }
    default: {
      std::string type = v.is_undefined() ? "Undefined" : v.TypeName();
      ThrowRuntime(fmt::format("Object of type {} is not JSON serializable", type));
    }
  }
}

}  // namespace

std::string JsonDumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dump(v, options, 0, out);
  return out;
}

}  // namespace sparkserve::text::jinja
