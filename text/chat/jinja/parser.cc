// Parser: jinja2's statement tags (if/for/set/macro/call/filter/with/break/continue/generation/
// block) over the expression parser.
#include "text/chat/jinja/parser.h"

#include <initializer_list>

#include "fmt/format.h"
#include "text/chat/jinja/expression_parser.h"

namespace sparkserve::text::jinja {
namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body ParseTemplate() {
    Body body = Subparse({});
    if (Cur().type != TokenType::kEof) Fail(fmt::format("unexpected '{}'", Describe(Cur())), Cur());
    return body;
  }

 private:
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
    } else if (tag == "call") {
      Next();
      ParseCallBlock(*s);
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

  void ParseCallBlock(Stmt& s) {
    s.kind = StmtKind::kCallBlock;
    s.name = "caller";
    if (IsOp(Cur(), "(")) {
      ParseSignature(s);
    }
    s.expr = ParseExpression(true);
    if (s.expr->kind != ExprKind::kCall) Fail("expected call", Cur());
    macros_.push_back(&s);
    int saved = loop_depth_;
    loop_depth_ = 0;
    s.bodies.push_back(ParseStatements({"endcall"}, "call", true));
    loop_depth_ = saved;
    macros_.pop_back();
  }

  void ParseMacro(Stmt& s) {
    s.kind = StmtKind::kMacro;
    s.name = ExpectName().text;
    ParseSignature(s);
    macros_.push_back(&s);
    int saved = loop_depth_;
    loop_depth_ = 0;
    s.bodies.push_back(ParseStatements({"endmacro"}, "macro", true));
    loop_depth_ = saved;
    macros_.pop_back();
    if (Cur().type == TokenType::kName && Cur().text == s.name) Next();
  }

  // `(a, b=default, ...)` of a macro or call block.
  void ParseSignature(Stmt& s) {
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
  }

  int loop_depth_ = 0;
};

}  // namespace

Body Parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).ParseTemplate(); }

}  // namespace sparkserve::text::jinja
