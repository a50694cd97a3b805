// Expression parser: a port of jinja2.parser's expression methods.
#include "text/chat/jinja/expression_parser.h"

namespace sparkserve::text::jinja {

bool ExpressionParser::IsTupleEnd(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = Cur();
  if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || IsOp(t, ")")) return true;
  for (std::string_view n : extra_end) if (IsName(t, n)) return true;
  return false;
}

ExprPtr ExpressionParser::ParseTuple(bool simplified, bool with_condexpr,
                                     std::initializer_list<std::string_view> extra_end, bool explicit_parens) {
  SourcePos pos = Cur().pos;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) ExpectOp(",");
    if (IsTupleEnd(extra_end)) break;
    args.push_back(simplified ? ParsePrimary() : ParseExpression(with_condexpr));
    if (IsOp(Cur(), ",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) Fail(fmt::format("Expected an expression, got '{}'", Describe(Cur())), Cur());
  }
  auto e = MakeExpr(ExprKind::kTuple, pos);
  e->children = std::move(args);
  return e;
}

ExprPtr ExpressionParser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

ExprPtr ExpressionParser::ParseCondExpr() {
  ExprPtr expr1 = ParseOr();
  while (IsName(Cur(), "if")) {
    SourcePos pos = Next().pos;
    ExprPtr cond = ParseOr();
    ExprPtr otherwise = SkipName("else") ? ParseCondExpr() : nullptr;
    auto e = MakeExpr(ExprKind::kCondExpr, pos);
    e->children.push_back(std::move(cond));
    e->children.push_back(std::move(expr1));
    e->children.push_back(std::move(otherwise));
    expr1 = std::move(e);
  }
  return expr1;
}

ExprPtr ExpressionParser::Binary(std::string op, ExprPtr l, ExprPtr r, SourcePos pos) {
  auto e = MakeExpr(ExprKind::kBinary, pos);
  e->name = std::move(op);
  e->children.push_back(std::move(l));
  e->children.push_back(std::move(r));
  return e;
}

ExprPtr ExpressionParser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName(Cur(), "or")) {
    SourcePos pos = Next().pos;
    left = Binary("or", std::move(left), ParseAnd(), pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName(Cur(), "and")) {
    SourcePos pos = Next().pos;
    left = Binary("and", std::move(left), ParseNot(), pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParseNot() {
  if (IsName(Cur(), "not")) {
    auto e = MakeExpr(ExprKind::kUnary, Next().pos);
    e->name = "not";
    e->children.push_back(ParseNot());
    return e;
  }
  return ParseCompare();
}

ExprPtr ExpressionParser::ParseCompare() {
  SourcePos pos = Cur().pos;
  ExprPtr expr = ParseMath1();
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    const Token& t = Cur();
    if (t.type == TokenType::kOperator &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
      ops.push_back(Next().text);
    } else if (IsName(t, "in")) {
      Next();
      ops.push_back("in");
    } else if (IsName(t, "not") && IsName(Look(), "in")) {
      Next();
      Next();
      ops.push_back("notin");
    } else {
      break;
    }
    operands.push_back(ParseMath1());
  }
  if (ops.empty()) return expr;
  auto e = MakeExpr(ExprKind::kCompare, pos);
  e->children.push_back(std::move(expr));
  for (auto& o : operands) e->children.push_back(std::move(o));
  e->ops = std::move(ops);
  return e;
}

ExprPtr ExpressionParser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOp(Cur(), "+") || IsOp(Cur(), "-")) {
    const Token& t = Next();
    std::string op = t.text;
    left = Binary(op, std::move(left), ParseConcat(), t.pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParseConcat() {
  ExprPtr left = ParseMath2();
  while (IsOp(Cur(), "~")) {
    SourcePos pos = Next().pos;
    left = Binary("~", std::move(left), ParseMath2(), pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (IsOp(Cur(), "*") || IsOp(Cur(), "/") || IsOp(Cur(), "//") || IsOp(Cur(), "%")) {
    const Token& t = Next();
    std::string op = t.text;
    left = Binary(op, std::move(left), ParsePow(), t.pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOp(Cur(), "**")) {
    SourcePos pos = Next().pos;
    left = Binary("**", std::move(left), ParseUnary(true), pos);
  }
  return left;
}

ExprPtr ExpressionParser::ParseUnary(bool with_filter) {
  ExprPtr node;
  if (IsOp(Cur(), "-") || IsOp(Cur(), "+")) {
    const Token& t = Next();
    node = MakeExpr(ExprKind::kUnary, t.pos);
    node->name = t.text;
    node->children.push_back(ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::ParsePrimary() {
  const Token& t = Cur();
  ExprPtr e;
  switch (t.type) {
    case TokenType::kName: {
      Next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        e = MakeExpr(ExprKind::kLiteral, t.pos);
        e->literal = Value(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        e = MakeExpr(ExprKind::kLiteral, t.pos);
        e->literal = Value::None();
      } else {
        e = MakeExpr(ExprKind::kName, t.pos);
        e->name = t.text;
        if (!macros_.empty() && t.text == "varargs") macros_.back()->uses_varargs = true;
        if (!macros_.empty() && t.text == "kwargs") macros_.back()->uses_kwargs = true;
        if (!macros_.empty() && t.text == "caller") macros_.back()->uses_caller = true;
      }
      return e;
    }
    case TokenType::kString: {
      e = MakeExpr(ExprKind::kLiteral, t.pos);
      std::string s;
      while (Cur().type == TokenType::kString) s += Next().text;
      e->literal = Value(std::move(s));
      return e;
    }
    case TokenType::kInteger:
      e = MakeExpr(ExprKind::kLiteral, t.pos);
      e->literal = Value(t.int_value);
      Next();
      return e;
    case TokenType::kFloat:
      e = MakeExpr(ExprKind::kLiteral, t.pos);
      e->literal = Value(t.float_value);
      Next();
      return e;
    default:
      break;
  }
  if (IsOp(t, "(")) {
    Next();
    e = ParseTuple(false, true, {}, true);
    ExpectOp(")");
    return e;
  }
  if (IsOp(t, "[")) {
    e = MakeExpr(ExprKind::kList, Next().pos);
    while (!IsOp(Cur(), "]")) {
      if (!e->children.empty()) ExpectOp(",");
      if (IsOp(Cur(), "]")) break;
      e->children.push_back(ParseExpression(true));
    }
    ExpectOp("]");
    return e;
  }
  if (IsOp(t, "{")) {
    e = MakeExpr(ExprKind::kDict, Next().pos);
    while (!IsOp(Cur(), "}")) {
      if (!e->children.empty()) ExpectOp(",");
      if (IsOp(Cur(), "}")) break;
      e->children.push_back(ParseExpression(true));
      ExpectOp(":");
      e->children.push_back(ParseExpression(true));
    }
    ExpectOp("}");
    return e;
  }
  Fail(fmt::format("unexpected '{}'", Describe(t)), t);
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(Cur(), ".") || IsOp(Cur(), "[")) {
      node = ParseSubscript(std::move(node));
    } else if (IsOp(Cur(), "(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp(Cur(), "|")) {
      node = ParseFilter(std::move(node), false);
    } else if (IsName(Cur(), "is")) {
      node = ParseTest(std::move(node));
    } else if (IsOp(Cur(), "(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr node) {
  const Token& t = Next();
  if (t.text == ".") {
    const Token& a = Cur();
    if (a.type == TokenType::kName) {
      auto e = MakeExpr(ExprKind::kGetAttr, a.pos);
      e->name = Next().text;
      e->children.push_back(std::move(node));
      return e;
    }
    if (a.type == TokenType::kInteger) {
      auto e = MakeExpr(ExprKind::kGetItem, a.pos);
      auto idx = MakeExpr(ExprKind::kLiteral, a.pos);
      idx->literal = Value(a.int_value);
      Next();
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(idx));
      return e;
    }
    Fail("expected name or number", a);
  }
  SourcePos pos = t.pos;
  std::vector<ExprPtr> args;
  while (!IsOp(Cur(), "]")) {
    if (!args.empty()) ExpectOp(",");
    args.push_back(ParseSubscribed());
  }
  ExpectOp("]");
  ExprPtr arg;
  if (args.size() == 1) {
    arg = std::move(args[0]);
  } else {
    arg = MakeExpr(ExprKind::kTuple, pos);
    arg->children = std::move(args);
  }
  if (arg->kind == ExprKind::kSlice) {
    arg->children.insert(arg->children.begin(), std::move(node));
    return arg;
  }
  auto e = MakeExpr(ExprKind::kGetItem, pos);
  e->children.push_back(std::move(node));
  e->children.push_back(std::move(arg));
  return e;
}

// One subscript: an expression or a slice `start:stop:step` (kSlice without its object yet).
ExprPtr ExpressionParser::ParseSubscribed() {
  SourcePos pos = Cur().pos;
  std::vector<ExprPtr> parts;
  if (IsOp(Cur(), ":")) {
    Next();
    parts.push_back(nullptr);
  } else {
    ExprPtr node = ParseExpression(true);
    if (!IsOp(Cur(), ":")) return node;
    Next();
    parts.push_back(std::move(node));
  }
  auto at_end = [&] { return IsOp(Cur(), "]") || IsOp(Cur(), ","); };
  if (IsOp(Cur(), ":")) {
    parts.push_back(nullptr);
  } else if (!at_end()) {
    parts.push_back(ParseExpression(true));
  } else {
    parts.push_back(nullptr);
  }
  if (IsOp(Cur(), ":")) {
    Next();
    parts.push_back(at_end() ? nullptr : ParseExpression(true));
  } else {
    parts.push_back(nullptr);
  }
  auto e = MakeExpr(ExprKind::kSlice, pos);
  e->children = std::move(parts);
  return e;
}

void ExpressionParser::ParseCallArgs(Expr& e) {
  ExpectOp("(");
  bool require_comma = false;
  while (!IsOp(Cur(), ")")) {
    if (require_comma) {
      ExpectOp(",");
      if (IsOp(Cur(), ")")) break;
    }
    if (IsOp(Cur(), "*") || IsOp(Cur(), "**")) Fail("*args / **kwargs in calls are not supported", Cur());
    if (Cur().type == TokenType::kName && IsOp(Look(), "=")) {
      std::string key = Next().text;
      Next();
      e.kwargs.emplace_back(std::move(key), ParseExpression(true));
    } else {
      if (!e.kwargs.empty()) Fail("positional argument follows keyword argument", Cur());
      e.children.push_back(ParseExpression(true));
    }
    require_comma = true;
  }
  ExpectOp(")");
}

ExprPtr ExpressionParser::ParseCall(ExprPtr node) {
  auto e = MakeExpr(ExprKind::kCall, Cur().pos);
  e->children.push_back(std::move(node));
  ParseCallArgs(*e);
  return e;
}

ExprPtr ExpressionParser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp(Cur(), "|") || start_inline) {
    if (!start_inline) Next();
    start_inline = false;
    const Token& t = ExpectName();
    auto e = MakeExpr(ExprKind::kFilter, t.pos);
    e->name = t.text;
    while (IsOp(Cur(), ".")) {
      Next();
      e->name += "." + ExpectName().text;
    }
    e->children.push_back(std::move(node));
    if (IsOp(Cur(), "(")) ParseCallArgs(*e);
    node = std::move(e);
  }
  return node;
}

ExprPtr ExpressionParser::ParseTest(ExprPtr node) {
  Next();  // 'is'
  bool negated = SkipName("not");
  const Token& t = ExpectName();
  auto e = MakeExpr(ExprKind::kTest, t.pos);
  e->name = t.text;
  e->negated = negated;
  while (IsOp(Cur(), ".")) {
    Next();
    e->name += "." + ExpectName().text;
  }
  e->children.push_back(std::move(node));
  const Token& c = Cur();
  if (IsOp(c, "(")) {
    ParseCallArgs(*e);
  } else if ((c.type == TokenType::kName || c.type == TokenType::kString || c.type == TokenType::kInteger ||
              c.type == TokenType::kFloat || IsOp(c, "[") || IsOp(c, "{")) &&
             !IsName(c, "else") && !IsName(c, "or") && !IsName(c, "and")) {
    if (IsName(c, "is")) Fail("You cannot chain multiple tests with is", c);
    e->children.push_back(ParsePostfix(ParsePrimary()));
  }
  return e;
}

}  // namespace sparkserve::text::jinja
