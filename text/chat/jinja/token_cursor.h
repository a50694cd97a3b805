// Token cursor shared by the expression and statement parsers: lookahead, expectations and
// syntax errors carrying the offending token's position.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "text/chat/jinja/ast.h"
#include "text/chat/jinja/lexer.h"

namespace sparkserve::text::jinja {

class TokenCursor {
 public:
  explicit TokenCursor(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

 protected:
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


 private:
  std::vector<Token> toks_;
  size_t i_ = 0;
};

}  // namespace sparkserve::text::jinja
