// Template values: constructors, Python truthiness/str/repr, equality and ordering.
#include "text/chat/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {

Value Value::Undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::List(ValueList items) {
  return Value(Kind::kList, std::make_shared<const ValueList>(std::move(items)));
}

Value Value::Tuple(ValueList items) {
  return Value(Kind::kTuple, std::make_shared<const ValueList>(std::move(items)));
}

Value Value::Dict(std::shared_ptr<DictData> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::shared_ptr<const DictData>(std::move(dict));
  return v;
}

Value Value::Dict() { return Dict(std::make_shared<DictData>()); }

Value Value::Object(std::shared_ptr<ObjectData> object) {
  Value v;
  v.kind_ = Kind::kObject;
  v.data_ = std::move(object);
  return v;
}

Value Value::Function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::make_shared<const CallableData>(CallableData{std::move(name), std::move(fn)});
  return v;
}

int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const ValueList& Value::items() const { return *std::get<std::shared_ptr<const ValueList>>(data_); }
const DictData& Value::dict() const { return *std::get<std::shared_ptr<const DictData>>(data_); }
ObjectData& Value::object() const { return *std::get<std::shared_ptr<ObjectData>>(data_); }
const CallableData& Value::callable() const { return *std::get<std::shared_ptr<const CallableData>>(data_); }

const std::string& Value::undefined_hint() const {
  static const std::string kNoHint = "value is undefined";
  if (auto* p = std::get_if<std::shared_ptr<const std::string>>(&data_)) return **p;
  return kNoHint;
}

void Value::RequireDefined() const {
  if (is_undefined()) ThrowRuntime(undefined_hint());
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !dict().entries.empty();
    default:
      return true;
  }
}

std::string FormatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's repr layout: fixed for 1e-4 <= |v| < 1e16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (char c : mant) if (c != '.') digits += c;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  }
  return out;
}

std::string ReprString(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c < 0x7F || IsPyPrintable(c)) {
      AppendUtf8(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    }
  }
  out += quote;
  return out;
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return str();
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return FormatFloat(as_double());
    case Kind::kString:
      return ReprString(str());
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = kind_ == Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      const auto& xs = items();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i) out += ", ";
        out += xs[i].Repr();
      }
      if (tuple && xs.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr() + ": " + v.Repr();
      }
      return out + "}";
    }
    case Kind::kObject: {
      const ObjectData& o = object();
      std::string out = "<" + o.type_name + " {";
      for (size_t i = 0; i < o.attrs.size(); ++i) {
        if (i) out += ", ";
        out += ReprString(o.attrs[i].first) + ": " + o.attrs[i].second.Repr();
      }
      return out + "}>";
    }
    case Kind::kCallable:
      return "<function " + callable().name + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kObject: return object().type_name;
    case Kind::kCallable: return "function";
  }
  return "object";
}

const Value* DictData::Find(const Value& key) const {
  for (const auto& entry : entries) {
    if (PyEquals(entry.first, key)) return &entry.second;
  }
  return nullptr;
}

const Value* DictData::Find(const std::string& key) const {
  for (const auto& entry : entries) {
    if (entry.first.is_string() && entry.first.str() == key) return &entry.second;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  for (auto& entry : entries) {
    if (PyEquals(entry.first, key)) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* ObjectData::Find(const std::string& name) const {
  for (const auto& a : attrs) {
    if (a.first == name) return &a.second;
  }
  return nullptr;
}

void ObjectData::Set(const std::string& name, Value value) {
  for (auto& a : attrs) {
    if (a.first == name) {
      a.second = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!PyEquals(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.dict().entries;
      if (x.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().Find(k);
        if (!other || !PyEquals(v, *other)) return false;
      }
      return true;
    }
    case Kind::kObject:
      return &a.object() == &b.object();
    case Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

bool PyLess(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order == code point order
  if (a.is_sequence() && a.kind() == b.kind()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!PyEquals(x[i], y[i])) return PyLess(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) a.RequireDefined();
  if (b.is_undefined()) b.RequireDefined();
  ThrowRuntime(fmt::format("'<' not supported between instances of '{}' and '{}'", a.TypeName(), b.TypeName()));
}

}  // namespace sparkserve::text::jinja
