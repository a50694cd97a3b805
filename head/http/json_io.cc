// JSON parsing/dumping and typed field readers for request bodies.
#include "head/http/json_io.h"

#include <cmath>

#include "fmt/format.h"
#include "head/http/api_error.h"
#include "text/output/json_nesting.h"

namespace sparkserve::head::http {

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

// Parses `text`; nullopt with `*error` set when it is not JSON we accept.
std::optional<Json> ParseBounded(const std::string& text, std::string* error) {
  if (text::JsonNestingDepth(text) > text::kMaxJsonNesting) {
    *error = fmt::format("JSON nested deeper than {} levels", text::kMaxJsonNesting);
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const Json::out_of_range& e) {
    *error = fmt::format("a number is out of range ({})", e.what());
  } catch (const Json::exception& e) {
    *error = e.what();
  }
  return std::nullopt;
}

}  // namespace

Json ParseJsonObject(const std::string& body) {
  std::string error;
  std::optional<Json> j = ParseBounded(body, &error);
  if (!j) throw RequestError(400, fmt::format("invalid JSON in the request body: {}", error));
  if (!j->is_object()) throw RequestError(400, "the request body must be a JSON object");
  return std::move(*j);
}

Json ParseJsonField(const std::string& text, const std::string& what, const char* param) {
  std::string error;
  std::optional<Json> j = ParseBounded(text, &error);
  if (!j) throw RequestError(400, fmt::format("{}: not valid JSON ({})", what, error), param);
  return std::move(*j);
}

std::string StringOr(const Json& obj, const char* key, const std::string& fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    throw RequestError(400, fmt::format("{}.{} must be a string, got {}", where, key, JsonTypeName(*it)),
                       where.substr(0, where.find_first_of("[.")));
  }
  return it->get<std::string>();
}

const char* JsonTypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    default: return "value";
  }
}

namespace {
const Json* Field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
[[noreturn]] void WrongType(const char* key, const char* want, const Json& got) {
  throw RequestError(400, fmt::format("'{}' must be {}, got {}", key, want, JsonTypeName(got)), key);
}
}  // namespace

std::optional<std::string> OptString(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  if (!f) return std::nullopt;
  if (!f->is_string()) WrongType(key, "a string", *f);
  return f->get<std::string>();
}

std::optional<bool> OptBool(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) WrongType(key, "a boolean", *f);
  return f->get<bool>();
}

std::optional<int64_t> OptInt(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  if (!f) return std::nullopt;
  if (f->is_number_integer()) return f->get<int64_t>();
  if (f->is_number_float()) {
    double d = f->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  WrongType(key, "an integer", *f);
}

std::optional<double> OptNumber(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  if (!f) return std::nullopt;
  if (!f->is_number()) WrongType(key, "a number", *f);
  return f->get<double>();
}

std::optional<double> OptNumberIn(const Json& obj, const char* key, double lo, double hi) {
  auto v = OptNumber(obj, key);
  if (v && !(*v >= lo && *v <= hi)) {
    throw RequestError(400, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, *v), key);
  }
  return v;
}

std::optional<int64_t> OptIntIn(const Json& obj, const char* key, int64_t lo, int64_t hi) {
  auto v = OptInt(obj, key);
  if (v && (*v < lo || *v > hi)) {
    throw RequestError(400, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, *v), key);
  }
  return v;
}

}  // namespace sparkserve::head::http
