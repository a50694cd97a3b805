// Python operator semantics on template values: arithmetic (int vs float like Python), `~`,
// comparisons, `in`, iteration, len(), indexing and slicing (`%` on strings: python_format.h).
#pragma once
#include <optional>
#include <string>

#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {

// op: + - * / // % ** ~ ; throws a runtime error for unsupported operand types.
Value BinaryOp(const std::string& op, const Value& a, const Value& b);
// op: == != < <= > >= in notin
bool CompareOp(const std::string& op, const Value& a, const Value& b);
Value Negate(const Value& v);
Value UnaryPlus(const Value& v);
// Python `item in container`.
bool Contains(const Value& container, const Value& item);
// Python iter(): list/tuple items, dict keys, string characters; undefined iterates as empty.
ValueList Iterate(const Value& v);
// Python len(); undefined has length 0.
int64_t Length(const Value& v);
// obj[index] for an integer index on a list/tuple/string (negative counts from the end);
// nullopt when out of range.
std::optional<Value> IndexSequence(const Value& obj, int64_t index);
// obj[start:stop:step] (each optional) on a list/tuple/string.
Value SliceValue(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace sparkserve::text::jinja
