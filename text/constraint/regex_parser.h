// Regular expressions (the Python `re` syntax that vLLM's guided_regex and JSON schema `pattern`
// use) as grammar expressions. The whole output must match (as re.fullmatch); a leading ^ and a
// trailing $ are accepted and change nothing.
//
// Supported: literals, ., [...] / [^...] classes with ranges, \d \w \s (ASCII digits and word
// characters, Unicode white space) and their negations, escapes (\n \t \r \f \v \0 \xHH \uHHHH
// \UHHHHHHHH, escaped punctuation), groups ( ), (?: ), (?P<name> ), alternation |, quantifiers
// * + ? {n} {n,} {,m} {n,m} (lazy forms too: same language). \D and \W stand for the ASCII
// characters outside \d and \w (a subset of Python's, so that every output matches).
// Refused with InvalidArgument naming the construct: backreferences, lookarounds, \b \B, anchors
// inside the pattern, inline flags, possessive quantifiers.
#pragma once
#include <string_view>

#include "absl/status/statusor.h"
#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

absl::StatusOr<ExprPtr> ParseRegex(std::string_view pattern);

// A grammar whose root is the pattern.
absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern);

}  // namespace sparkserve::text::constraint
