// JSON schema -> Grammar: the text of a JSON value the schema accepts, in the property order the
// schema declares, with bounded whitespace between tokens (one space, or a newline and up to
// kMaxIndent spaces/tabs), so a weak model cannot spend its tokens on layout.
//
// Supported (OpenAI's strict subset and what vLLM accepts): type (and type lists), enum, const,
// anyOf, oneOf (as anyOf), allOf of one schema, $ref into the document (#, #/$defs/..,
// #/definitions/.., any JSON pointer; recursion allowed), nullable; objects: properties, required,
// additionalProperties (false by default when properties are given; true or a schema allows other
// keys after the declared ones); arrays: items, prefixItems, minItems, maxItems; strings:
// minLength, maxLength, pattern (a full match), format (date, time, date-time, duration, email,
// hostname, ipv4, ipv6, uuid; others are annotations); numbers: minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (draft 4 booleans too). Annotations (title, description,
// default, examples, ...) and unknown keywords are ignored, as JSON schema does.
// Refused with InvalidArgument naming the keyword and where it is: not, if/then/else,
// patternProperties, propertyNames, dependent*, min/maxProperties, uniqueItems: true, contains,
// multipleOf, unevaluated* other than false; and unsatisfiable inputs (minLength > maxLength, an
// empty enum, bounds no number meets, a required property that additionalProperties: false
// forbids, ...).
#pragma once
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "text/constraint/grammar.h"
#include "text/constraint/json_text.h"

namespace sparkserve::text::constraint {

// The grammar of JSON text valid against `schema`.
absl::StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);
// Any JSON object (OpenAI's response_format json_object).
Grammar JsonObjectGrammar();

// Adds the schema's value to `g` (its rules named after `prefix`) and returns the expression of
// the value: for grammars that embed JSON (tool-call arguments inside markup). $refs resolve in
// `root` (default: `schema` itself).
absl::StatusOr<ExprPtr> AddJsonSchema(Grammar& g, const nlohmann::ordered_json& schema, std::string_view prefix,
                                      const nlohmann::ordered_json* root = nullptr);

}  // namespace sparkserve::text::constraint
