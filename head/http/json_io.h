// JSON in and out of the HTTP layer: parsing a request body, typed field readers that throw a
// 400 RequestError naming the field, and dumping that never throws on invalid UTF-8.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace sparkserve::head::http {

using Json = nlohmann::ordered_json;

// Compact JSON; invalid UTF-8 becomes U+FFFD instead of throwing.
std::string DumpJson(const Json& j);

// The body as a JSON object, or a 400 ("invalid JSON: ..." / "the request body must be a JSON object").
// Nesting deeper than text::kMaxJsonNesting (64) and numbers out of range are 400s too, so every
// value a handler holds is safe to copy and dump.
Json ParseJsonObject(const std::string& body);

// JSON text found inside a request (tool-call arguments...): the parsed value, or a 400 "`what`: not
// valid JSON (why)" naming `param`. The same depth and range checks as ParseJsonObject.
Json ParseJsonField(const std::string& text, const std::string& what, const char* param);

// A field that must be a string when present: absent or null -> `fallback`, else 400 naming `where`.
std::string StringOr(const Json& obj, const char* key, const std::string& fallback, const std::string& where);

// Typed optional fields: absent or null -> nullopt; the wrong type -> 400 naming `key`.
std::optional<std::string> OptString(const Json& obj, const char* key);
std::optional<bool> OptBool(const Json& obj, const char* key);
std::optional<int64_t> OptInt(const Json& obj, const char* key);
std::optional<double> OptNumber(const Json& obj, const char* key);

// A number inside [lo, hi] (inclusive), else 400 with the range in the message.
std::optional<double> OptNumberIn(const Json& obj, const char* key, double lo, double hi);
std::optional<int64_t> OptIntIn(const Json& obj, const char* key, int64_t lo, int64_t hi);

// A type name for messages ("string", "array", ...).
const char* JsonTypeName(const Json& j);

}  // namespace sparkserve::head::http
