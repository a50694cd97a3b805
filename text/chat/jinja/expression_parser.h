// Expression parser: jinja2's expression grammar (precedence from inline if down to primaries,
// postfix subscripts/calls, filters, `is` tests, slices, tuples, list and dict literals).
#pragma once
#include <initializer_list>
#include <string_view>
#include <vector>

#include "text/chat/jinja/token_cursor.h"

namespace sparkserve::text::jinja {

class ExpressionParser : public TokenCursor {
 public:
  using TokenCursor::TokenCursor;

 protected:
  // jinja2's parse_tuple: `a`, `a, b`, `(a, b)`; extra_end names end the tuple (e.g. "in").
  ExprPtr ParseTuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                     bool explicit_parens);
  ExprPtr ParseExpression(bool with_condexpr);
  // `node | f(args) | g`; with start_inline the first `|` is implied ({% filter f %}).
  ExprPtr ParseFilter(ExprPtr node, bool start_inline);

  std::vector<Stmt*> macros_;  // enclosing macros / call blocks: reads of varargs/kwargs/caller mark them

 private:
  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const;
  ExprPtr ParseCondExpr();
  ExprPtr Binary(std::string op, ExprPtr l, ExprPtr r, SourcePos pos);
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  ExprPtr ParseSubscribed();
  void ParseCallArgs(Expr& e);
  ExprPtr ParseCall(ExprPtr node);
  ExprPtr ParseTest(ExprPtr node);
};

}  // namespace sparkserve::text::jinja
