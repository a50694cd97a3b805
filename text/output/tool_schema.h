// ToolSchemas: the parameter schemas of the tools a request offered, and the conversion of a
// Qwen3.5 XML parameter value (always text) into the JSON type its schema declares.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text {

class ToolSchemas {
 public:
  ToolSchemas() = default;
  // From a request's tools: OpenAI `[{"type": "function", "function": {"name", "parameters"}}]`
  // or Anthropic `[{"name", "input_schema"}]` entries. A tool without a name is an error; a tool
  // without parameters simply declares none.
  static absl::StatusOr<ToolSchemas> FromTools(const nlohmann::json& tools);

  // The `properties` object of `function`'s parameter schema, or nullptr when the function is
  // unknown or declares no properties.
  const nlohmann::json* Properties(std::string_view function) const;

 private:
  // Shared: the parsers of a request's n samples copy the schemas, never the JSON they hold.
  std::shared_ptr<const std::map<std::string, nlohmann::json, std::less<>>> properties_;
};

// Converts a parameter's text to the type `property_schema` (the parameter's entry in
// `properties`; nullptr when the parameter is not declared) asks for, as vLLM's qwen3_coder parser
// does:
// - undeclared parameter, or a schema without a type: the text, unchanged (a string);
// - nullable schema ("type": "null", a type list or anyOf containing "null") and text "null" or
//   "None" (any case): null;
// - string/str/text/varchar/char/enum: the text unchanged;
// - other types: "null"/"None" (any case) -> null;
// - int*/uint*/long*/short*/unsigned*: an integer (Python int(): surrounding whitespace, sign,
//   single underscores between digits);
// - num*/float*: a number, integral values as integers (3.0 -> 3), non-finite ones stay text;
// - boolean/bool/binary: "true"/"false" in any case;
// - object/array/arr/dict*/list*: the text parsed as JSON;
// - any other type name: JSON if the text parses, else the text.
// Whenever a conversion fails the value stays the original text (vLLM turns a non-boolean into
// false; here it stays text, so nothing the model wrote is replaced by something it did not).
nlohmann::ordered_json ConvertParameterValue(std::string_view text,
                                             const nlohmann::json* property_schema);

}  // namespace sparkserve::text
