// Parser: a recursive-descent port of jinja2.parser for the subset chat templates use.
#include "head/chat/jinja/parser.h"

#include <initializer_list>

#include "fmt/format.h"

namespace sparkserve::chat::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body ParseTemplate() {
    Body body = Subparse({});
    if (Cur().type != TokenType::kEof) Fail(fmt::format("unexpected '{}'", Describe(Cur())), Cur());
    return body;
  }

 private:
  // ---- token stream ----
  const Token& Cur() const { return toks_[i_]; }
  const Token& Look() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  const Token& Next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool IsOp(const Token& t, std::string_view op) const { return t.type == TokenType::kOperator && t.text == op; }
  bool IsName(const Token& t, std::string_view name) const { return t.type == TokenType::kName && t.text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(Cur(), op)) return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(Cur(), name)) return false;
    Next();
    return true;
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "end of statement block";
      case TokenType::kVarEnd: return "end of print statement";
      case TokenType::kBlockBegin: return "begin of statement block";
      case TokenType::kVarBegin: return "begin of print statement";
      case TokenType::kData: return "template data";
      case TokenType::kString: return "string";
      case TokenType::kInteger: return "integer";
      case TokenType::kFloat: return "float";
      default: return t.text;
    }
  }
  [[noreturn]] void Fail(const std::string& message, const Token& at) const {
    throw TemplateError(ErrorKind::kSyntax, message, at.pos);
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Fail(fmt::format("expected token '{}', got '{}'", op, Describe(Cur())), Cur());
  }
  const Token& ExpectName() {
    if (Cur().type != TokenType::kName) Fail(fmt::format("expected token 'name', got '{}'", Describe(Cur())), Cur());
    return Next();
  }
  void Expect(TokenType type, const char* what) {
    if (Cur().type != type) Fail(fmt::format("expected token '{}', got '{}'", what, Describe(Cur())), Cur());
    Next();
  }

  static ExprPtr MakeExpr(ExprKind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  // ---- statements ----
  Body Subparse(std::initializer_list<std::string_view> end_tags) {
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) return body;
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kData;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
      } else if (t.type == TokenType::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->pos = Next().pos;
        s->expr = ParseTuple(false, true, {}, false);
        Expect(TokenType::kVarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        Next();
        for (std::string_view end : end_tags) {
          if (IsName(Cur(), end)) return body;
        }
        body.push_back(ParseStatement());
        Expect(TokenType::kBlockEnd, "end of statement block");
      } else {
        Fail(fmt::format("unexpected '{}'", Describe(t)), t);
      }
    }
  }

  // Body up to one of `end_tags`; with drop_needle the end tag name is consumed.
  Body ParseStatements(std::initializer_list<std::string_view> end_tags, const char* innermost, bool drop_needle) {
    Expect(TokenType::kBlockEnd, "end of statement block");
    Body body = Subparse(end_tags);
    if (Cur().type == TokenType::kEof) {
      std::string want;
      for (std::string_view e : end_tags) want += (want.empty() ? "" : " or ") + fmt::format("'{}'", e);
      Fail(fmt::format("Unexpected end of template. Jinja was looking for the following tags: {}. The innermost "
                       "block that needs to be closed is '{}'.", want, innermost), Cur());
    }
    if (drop_needle) Next();
    return body;
  }

  StmtPtr ParseStatement() {
    const Token& t = Cur();
    if (t.type != TokenType::kName) Fail("tag name expected", t);
    auto s = std::make_unique<Stmt>();
    s->pos = t.pos;
    const std::string tag = t.text;
    if (tag == "if") {
      Next();
      ParseIf(*s);
    } else if (tag == "for") {
      Next();
      ParseFor(*s);
    } else if (tag == "set") {
      Next();
      ParseSet(*s);
    } else if (tag == "macro") {
      Next();
      ParseMacro(*s);
    } else if (tag == "filter") {
      Next();
      s->kind = StmtKind::kFilterBlock;
      s->expr = ParseFilter(MakeExpr(ExprKind::kBlockInput, t.pos), true);
      s->bodies.push_back(ParseStatements({"endfilter"}, "filter", true));
    } else if (tag == "with") {
      Next();
      s->kind = StmtKind::kWith;
      while (Cur().type != TokenType::kBlockEnd) {
        if (!s->assignments.empty()) ExpectOp(",");
        std::string name = ExpectName().text;
        ExpectOp("=");
        s->assignments.emplace_back(name, ParseExpression(true));
      }
      s->bodies.push_back(ParseStatements({"endwith"}, "with", true));
    } else if (tag == "break" || tag == "continue") {
      Next();
      if (loop_depth_ == 0) Fail(fmt::format("'{}' outside of a loop", tag), t);
      s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    } else if (tag == "generation") {
      Next();
      s->kind = StmtKind::kScope;
      s->bodies.push_back(ParseStatements({"endgeneration"}, "generation", true));
    } else if (tag == "block") {
      Next();
      ExpectName();
      if (SkipName("scoped")) {}
      if (SkipName("required")) {}
      s->kind = StmtKind::kScope;
      s->bodies.push_back(ParseStatements({"endblock"}, "block", true));
      if (Cur().type == TokenType::kName) Next();
    } else {
      Fail(fmt::format("Encountered unknown tag '{}'.", tag), t);
    }
    return s;
  }

  void ParseIf(Stmt& s) {
    s.kind = StmtKind::kIf;
    s.conditions.push_back(ParseTuple(false, false, {}, false));
    while (true) {
      s.bodies.push_back(ParseStatements({"elif", "else", "endif"}, "if", false));
      const Token& t = Next();
      if (t.text == "elif") {
        s.conditions.push_back(ParseTuple(false, false, {}, false));
      } else if (t.text == "else") {
        s.bodies.push_back(ParseStatements({"endif"}, "if", true));
        return;
      } else {
        return;
      }
    }
  }

  void ParseFor(Stmt& s) {
    s.kind = StmtKind::kFor;
    ParseAssignTargets(s, {"in"}, false);
    if (!SkipName("in")) Fail(fmt::format("expected token 'in', got '{}'", Describe(Cur())), Cur());
    s.expr = ParseTuple(false, false, {"recursive"}, false);
    if (SkipName("if")) s.condition = ParseExpression(true);
    if (IsName(Cur(), "recursive")) Fail("recursive loops are not supported", Cur());
    ++loop_depth_;
    s.bodies.push_back(ParseStatements({"endfor", "else"}, "for", false));
    --loop_depth_;
    if (Next().text == "else") {
      int saved = loop_depth_;
      loop_depth_ = 0;
      s.bodies.push_back(ParseStatements({"endfor"}, "for", true));
      loop_depth_ = saved;
    }
  }

  // Assignment target: name, `a, b` (tuple of names) or, when allowed, `ns.attr`.
  void ParseAssignTargets(Stmt& s, std::initializer_list<std::string_view> end_names, bool with_namespace) {
    if (with_namespace && Cur().type == TokenType::kName && IsOp(Look(), ".")) {
      s.targets.push_back(Next().text);
      Next();
      s.attr = ExpectName().text;
      return;
    }
    bool parens = SkipOp("(");
    while (true) {
      if (!s.targets.empty()) {
        if (!SkipOp(",")) break;
        s.unpack = true;
      }
      bool end = Cur().type == TokenType::kBlockEnd || IsOp(Cur(), ")") || IsOp(Cur(), "=");
      for (std::string_view n : end_names) end = end || IsName(Cur(), n);
      if (end) break;
      const Token& t = Cur();
      if (t.type != TokenType::kName) Fail(fmt::format("can't assign to '{}'", Describe(t)), t);
      if (t.text == "true" || t.text == "false" || t.text == "none" || t.text == "True" || t.text == "False" || t.text == "None") {
        Fail(fmt::format("can't assign to constant '{}'", t.text), t);
      }
      s.targets.push_back(Next().text);
    }
    if (parens) {
      ExpectOp(")");
      s.unpack = true;
    }
    if (s.targets.empty()) Fail(fmt::format("expected a name, got '{}'", Describe(Cur())), Cur());
  }

  void ParseSet(Stmt& s) {
    ParseAssignTargets(s, {}, true);
    if (SkipOp("=")) {
      s.kind = StmtKind::kSet;
      s.expr = ParseTuple(false, true, {}, false);
      return;
    }
    s.kind = StmtKind::kSetBlock;
    if (s.unpack) Fail("a block set needs a single name", Cur());
    if (IsOp(Cur(), "|")) s.expr = ParseFilter(MakeExpr(ExprKind::kBlockInput, Cur().pos), false);
    s.bodies.push_back(ParseStatements({"endset"}, "set", true));
  }

  void ParseMacro(Stmt& s) {
    s.kind = StmtKind::kMacro;
    s.name = ExpectName().text;
    ExpectOp("(");
    while (!IsOp(Cur(), ")")) {
      if (!s.targets.empty()) ExpectOp(",");
      if (IsOp(Cur(), ")")) break;
      s.targets.push_back(ExpectName().text);
      if (SkipOp("=")) {
        s.defaults.push_back(ParseExpression(true));
      } else {
        if (!s.defaults.empty() && s.defaults.back()) Fail("non-default argument follows default argument", Cur());
        s.defaults.push_back(nullptr);
      }
    }
    ExpectOp(")");
    macros_.push_back(&s);
    int saved = loop_depth_;
    loop_depth_ = 0;
    s.bodies.push_back(ParseStatements({"endmacro"}, "macro", true));
    loop_depth_ = saved;
    macros_.pop_back();
    if (Cur().type == TokenType::kName && Cur().text == s.name) Next();
  }

  // ---- expressions ----
  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const {
    const Token& t = Cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || IsOp(t, ")")) return true;
    for (std::string_view n : extra_end) if (IsName(t, n)) return true;
    return false;
  }

  ExprPtr ParseTuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                     bool explicit_parens) {
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

  ExprPtr ParseExpression(bool with_condexpr) { return with_condexpr ? ParseCondExpr() : ParseOr(); }

  ExprPtr ParseCondExpr() {
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

  ExprPtr Binary(std::string op, ExprPtr l, ExprPtr r, SourcePos pos) {
    auto e = MakeExpr(ExprKind::kBinary, pos);
    e->name = std::move(op);
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName(Cur(), "or")) {
      SourcePos pos = Next().pos;
      left = Binary("or", std::move(left), ParseAnd(), pos);
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName(Cur(), "and")) {
      SourcePos pos = Next().pos;
      left = Binary("and", std::move(left), ParseNot(), pos);
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName(Cur(), "not")) {
      auto e = MakeExpr(ExprKind::kUnary, Next().pos);
      e->name = "not";
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
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

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp(Cur(), "+") || IsOp(Cur(), "-")) {
      const Token& t = Next();
      std::string op = t.text;
      left = Binary(op, std::move(left), ParseConcat(), t.pos);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp(Cur(), "~")) {
      SourcePos pos = Next().pos;
      left = Binary("~", std::move(left), ParseMath2(), pos);
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp(Cur(), "*") || IsOp(Cur(), "/") || IsOp(Cur(), "//") || IsOp(Cur(), "%")) {
      const Token& t = Next();
      std::string op = t.text;
      left = Binary(op, std::move(left), ParsePow(), t.pos);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp(Cur(), "**")) {
      SourcePos pos = Next().pos;
      left = Binary("**", std::move(left), ParseUnary(true), pos);
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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

  ExprPtr ParsePostfix(ExprPtr node) {
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

  ExprPtr ParseFilterExpr(ExprPtr node) {
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

  ExprPtr ParseSubscript(ExprPtr node) {
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
  ExprPtr ParseSubscribed() {
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

  void ParseCallArgs(Expr& e) {
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

  ExprPtr ParseCall(ExprPtr node) {
    auto e = MakeExpr(ExprKind::kCall, Cur().pos);
    e->children.push_back(std::move(node));
    ParseCallArgs(*e);
    return e;
  }

  ExprPtr ParseFilter(ExprPtr node, bool start_inline) {
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

  ExprPtr ParseTest(ExprPtr node) {
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

  std::vector<Token> toks_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  std::vector<Stmt*> macros_;
};

}  // namespace

Body Parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).ParseTemplate(); }

}  // namespace sparkserve::chat::jinja
