// Lexer: template source -> tokens, with jinja2's whitespace rules as Hugging Face configures them
// (trim_blocks, lstrip_blocks, `-`/`+` markers, newline normalisation, the final newline dropped).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat/jinja/error.h"

namespace sparkserve::text::jinja {

enum class TokenType {
  kData,        // literal text to output
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,      // text holds the decoded value
  kInteger,
  kFloat,
  kOperator,    // text holds the operator ("+", "//", "(", ...)
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  SourcePos pos;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws TemplateError(kSyntax) on malformed input.
std::vector<Token> Tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace sparkserve::text::jinja
