// Parser: tokens -> statement list, following jinja2's grammar (operator precedence, tests,
// filters, slices, tuples, inline if) and its statement tags (if/for/set/macro/filter/with/...).
#pragma once
#include <vector>

#include "text/chat/jinja/ast.h"
#include "text/chat/jinja/lexer.h"

namespace sparkserve::text::jinja {

// Throws TemplateError(kSyntax) with the offending token's position.
Body Parse(std::vector<Token> tokens);

}  // namespace sparkserve::text::jinja
