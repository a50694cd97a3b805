// GBNF, the grammar format of llama.cpp (also what vLLM/XGrammar accept as EBNF), as a Grammar:
//
//   root   ::= "{" ws pair (ws "," ws pair)* ws "}"     # comments run to the end of the line
//   pair   ::= [a-z]+ ws ":" ws ("true" | "false" | num)
//   num    ::= "-"? [0-9]{1,6}
//   ws     ::= [ \t\n]{0,4}
//
// Literals "..." and classes [...] / [^...] take the escapes \n \r \t \\ \" \[ \] \- \xHH
// \uHHHH \UHHHHHHHH; . is any character; repetition * + ? {m} {m,} {m,n}; ( ) groups. A rule
// ends at the end of its line unless inside parentheses or right after | or ::=. The start rule
// is `root`. Errors name the line and what was expected; undefined rules are named.
#pragma once
#include <string_view>

#include "absl/status/statusor.h"
#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root = "root");

}  // namespace sparkserve::text::constraint
