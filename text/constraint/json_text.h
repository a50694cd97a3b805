// JSON's text as grammar expressions: the characters of a string (raw or escaped), a value's
// regex carried over to its escaped JSON text, and the bounded whitespace between tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

inline constexpr int kMaxIndent = 20;

// Raw characters of a JSON string: anything but '"', '\' and control characters.
std::vector<CodepointRange> RawStringChars();
// One character of a JSON string: raw, or an escape (\u escapes of surrogates excluded, so every
// unit is exactly one character of the decoded string, as maxLength counts them).
ExprPtr JsonChar();
// The JSON-escaped form of a character (for characters that cannot appear raw).
std::string EscapedChar(uint32_t cp);
// A regex over a string's value -> the same over its JSON text (specials escaped).
ExprPtr JsonEscape(const ExprPtr& e);
// The whitespace allowed between JSON tokens: one space, or a newline and up to kMaxIndent
// spaces/tabs.
ExprPtr JsonWhitespace();
// The body of a JSON string (between the quotes) holding `min`..`max` characters (max < 0: any).
ExprPtr JsonStringChars(int32_t min, int32_t max);

}  // namespace sparkserve::text::constraint
