// Template errors: the source position every error carries, and the exception the lexer, parser
// and evaluator throw internally (converted to absl::Status at the Template API boundary).
#pragma once
#include <stdexcept>
#include <string>

namespace sparkserve::text::jinja {

// 1-based line and column in the template source (after newline normalisation).
struct SourcePos {
  int line = 0;
  int column = 0;
};

enum class ErrorKind {
  kSyntax,   // the template cannot be parsed
  kRuntime,  // a type error, undefined access, unknown filter... while rendering
  kRaised,   // the template called raise_exception(message)
};

class TemplateError : public std::runtime_error {
 public:
  TemplateError(ErrorKind kind, std::string message, SourcePos pos = {})
      : std::runtime_error(message), kind_(kind), message_(std::move(message)), pos_(pos) {}
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  SourcePos pos() const { return pos_; }
  bool has_pos() const { return pos_.line > 0; }
  // Attaches a position when the error does not carry one yet (the innermost node wins).
  void set_pos_if_missing(SourcePos pos) {
    if (!has_pos()) pos_ = pos;
  }

 private:
  ErrorKind kind_;
  std::string message_;
  SourcePos pos_;
};

[[noreturn]] inline void ThrowRuntime(std::string message) {
  throw TemplateError(ErrorKind::kRuntime, std::move(message));
}

}  // namespace sparkserve::text::jinja
