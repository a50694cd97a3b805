// Lexer: mirrors jinja2's Lexer.tokeniter for the default delimiters.
#include "text/chat/jinja/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "fmt/format.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : src_(std::move(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t tag = FindTagStart(pos);
      if (tag == std::string::npos) {
        EmitData(src_.substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign != '-' && sign != '+') sign = '\0';
      size_t cursor = tag + 2 + (sign ? 1 : 0);
      bool is_raw = kind == '%' && IsRawBegin(cursor);
      std::string text = src_.substr(pos, tag - pos);
      ApplyLeftStrip(text, sign, kind != '{', line_starting);
      EmitData(std::move(text), pos);
      if (kind == '#') {
        pos = LexComment(cursor, tag);
      } else if (is_raw) {
        pos = LexRaw(cursor, tag);
      } else {
        pos = LexTag(cursor, tag, kind == '%');
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{TokenType::kEof, "", 0, 0, PosAt(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos PosAt(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t start = line_starts_[line - 1];
    int col = static_cast<int>(CodepointCount(std::string_view(src_).substr(start, offset - start))) + 1;
    return SourcePos{static_cast<int>(line), col};
  }

  [[noreturn]] void Fail(const std::string& message, size_t offset) const {
    throw TemplateError(ErrorKind::kSyntax, message, PosAt(offset));
  }

  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // The `-` / lstrip_blocks handling of the text before a tag.
  void ApplyLeftStrip(std::string& text, char sign, bool block_like, bool line_starting) const {
    if (sign == '-') {
      text = PyStrip(text, std::nullopt, false, true);
    } else if (sign == '\0' && block_like && opt_.lstrip_blocks) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        if (text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
      }
    }
  }

  void EmitData(std::string text, size_t offset) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenType::kData, std::move(text), 0, 0, PosAt(offset)});
  }

  size_t SkipSpace(size_t p) const {
    while (p < src_.size()) {
      size_t n = 1;
      char32_t c = static_cast<unsigned char>(src_[p]);
      if (c >= 0x80) {
        std::u32string u = DecodeUtf8(std::string_view(src_).substr(p, 4));
        c = u.empty() ? 0 : u[0];
        std::string enc;
        AppendUtf8(enc, c);
        n = enc.size();
      }
      if (!IsPySpace(c)) break;
      p += n;
    }
    return p;
  }

  // After a tag end: `-` strips all following whitespace, a plain block end drops one newline.
  size_t AfterEnd(size_t end, char sign, bool trim) const {
    if (sign == '-') return SkipSpace(end);
    if (sign == '\0' && trim && end < src_.size() && src_[end] == '\n') return end + 1;
    return end;
  }

  size_t LexComment(size_t cursor, size_t tag) {
    size_t hit = src_.find("#}", cursor);
    if (hit == std::string::npos) Fail("Missing end of comment tag", tag);
    char sign = hit > cursor && (src_[hit - 1] == '-' || src_[hit - 1] == '+') ? src_[hit - 1] : '\0';
    return AfterEnd(hit + 2, sign, opt_.trim_blocks);
  }

  bool IsRawBegin(size_t cursor) const {
    size_t p = SkipSpace(cursor);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpace(p + 3);
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  size_t LexRaw(size_t cursor, size_t tag) {
    size_t p = SkipSpace(SkipSpace(cursor) + 3);
    size_t body = src_[p] == '-' ? SkipSpace(p + 3) : p + 2;
    for (size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t q = at + 2;
      char sign = (src_[q] == '-' || src_[q] == '+') ? src_[q] : '\0';
      if (sign) ++q;
      q = SkipSpace(q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = SkipSpace(q + 6);
      char end_sign = '\0';
      if (src_.compare(q, 3, "-%}") == 0 || src_.compare(q, 3, "+%}") == 0) {
        end_sign = src_[q];
        q += 3;
      } else if (src_.compare(q, 2, "%}") == 0) {
        q += 2;
      } else {
        continue;
      }
      std::string text = src_.substr(body, at - body);
      bool line_starting = body > 0 && src_[body - 1] == '\n';
      ApplyLeftStrip(text, sign, true, line_starting);
      EmitData(std::move(text), body);
      return AfterEnd(q, end_sign, opt_.trim_blocks);
    }
    Fail("Missing end of raw directive", tag);
  }

  size_t LexTag(size_t cursor, size_t tag, bool block) {
    tokens_.push_back(Token{block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", 0, 0, PosAt(tag)});
    std::vector<char> balance;
    size_t p = cursor;
    while (true) {
      if (balance.empty()) {
        if (block) {
          if (src_.compare(p, 3, "-%}") == 0 || src_.compare(p, 3, "+%}") == 0) {
            tokens_.push_back(Token{TokenType::kBlockEnd, "", 0, 0, PosAt(p)});
            return AfterEnd(p + 3, src_[p], opt_.trim_blocks);
          }
          if (src_.compare(p, 2, "%}") == 0) {
            tokens_.push_back(Token{TokenType::kBlockEnd, "", 0, 0, PosAt(p)});
            return AfterEnd(p + 2, '\0', opt_.trim_blocks);
          }
        } else {
          if (src_.compare(p, 3, "-}}") == 0) {
            tokens_.push_back(Token{TokenType::kVarEnd, "", 0, 0, PosAt(p)});
            return AfterEnd(p + 3, '-', false);
          }
          if (src_.compare(p, 2, "}}") == 0) {
            tokens_.push_back(Token{TokenType::kVarEnd, "", 0, 0, PosAt(p)});
            return p + 2;
          }
        }
      }
      if (p >= src_.size()) Fail(block ? "Unexpected end of template: missing '%}'" : "Unexpected end of template: missing '}}'", tag);
      size_t q = SkipSpace(p);
      if (q != p) {
        p = q;
        continue;
      }
      p = LexExpressionToken(p, balance);
    }
  }

  size_t LexExpressionToken(size_t p, std::vector<char>& balance) {
    const char c = src_[p];
    Token tok;
    tok.pos = PosAt(p);
    if (IsDigit(c)) return LexNumber(p, std::move(tok));
    if (IsNameStart(c)) {
      size_t e = p;
      while (e < src_.size() && IsNameChar(src_[e])) ++e;
      tok.type = TokenType::kName;
      tok.text = src_.substr(p, e - p);
      tokens_.push_back(std::move(tok));
      return e;
    }
    if (c == '\'' || c == '"') return LexString(p, std::move(tok));
    static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
                                                "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
    for (std::string_view op : kOps) {
      if (src_.compare(p, op.size(), op) != 0) continue;
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op[0]);
      } else if (op == ")" || op == "]" || op == "}") {
        const char open = op == ")" ? '(' : op == "]" ? '[' : '{';
        if (balance.empty()) Fail(fmt::format("unexpected '{}'", op), p);
        if (balance.back() != open) {
          const char want = balance.back() == '(' ? ')' : balance.back() == '[' ? ']' : '}';
          Fail(fmt::format("unexpected '{}', expected '{}'", op, want), p);
        }
        balance.pop_back();
      }
      tok.type = TokenType::kOperator;
      tok.text = std::string(op);
      tokens_.push_back(std::move(tok));
      return p + op.size();
    }
    Fail(fmt::format("unexpected char '{}'", std::string(1, c)), p);
  }

  size_t LexNumber(size_t p, Token tok) {
    auto digits = [&](size_t q) {  // (\d+_)*\d+ ; returns end or q when none
      size_t e = q;
      while (e < src_.size() && (IsDigit(src_[e]) || (src_[e] == '_' && e > q && e + 1 < src_.size() && IsDigit(src_[e + 1])))) ++e;
      return e;
    };
    auto clean = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    // Prefixed integers.
    if (src_[p] == '0' && p + 1 < src_.size() && std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
      int base = (src_[p + 1] | 0x20) == 'b' ? 2 : (src_[p + 1] | 0x20) == 'o' ? 8 : 16;
      size_t e = p + 2;
      while (e < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      tok.type = TokenType::kInteger;
      tok.int_value = std::strtoll(clean(src_.substr(p + 2, e - p - 2)).c_str(), nullptr, base);
      tokens_.push_back(std::move(tok));
      return e;
    }
    size_t e = digits(p);
    bool is_float = false;
    size_t f = e;
    if (f + 1 < src_.size() && src_[f] == '.' && IsDigit(src_[f + 1])) {
      f = digits(f + 1);
      is_float = true;
    }
    if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
      size_t g = f + 1;
      if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
      if (g < src_.size() && IsDigit(src_[g])) {
        f = digits(g);
        is_float = true;
      }
    }
    if (is_float) {
      tok.type = TokenType::kFloat;
      tok.float_value = std::strtod(clean(src_.substr(p, f - p)).c_str(), nullptr);
      tokens_.push_back(std::move(tok));
      return f;
    }
    tok.type = TokenType::kInteger;
    std::string text = clean(src_.substr(p, e - p));
    errno = 0;
    tok.int_value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE) Fail("integer literal too large", p);
    tokens_.push_back(std::move(tok));
    return e;
  }

  // Python string literal with unicode-escape decoding, as jinja2 does.
  size_t LexString(size_t p, Token tok) {
    const char quote = src_[p];
    std::string out;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) Fail("unexpected end of string", p);
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) Fail("unexpected end of string", p);
      char e = src_[i + 1];
      i += 2;
      auto hex = [&](int n) {
        if (i + static_cast<size_t>(n) > src_.size()) Fail("truncated escape in string", p);
        std::string h = src_.substr(i, static_cast<size_t>(n));
        for (char d : h) if (!std::isxdigit(static_cast<unsigned char>(d))) Fail("truncated escape in string", p);
        i += static_cast<size_t>(n);
        return static_cast<char32_t>(std::strtoul(h.c_str(), nullptr, 16));
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': AppendUtf8(out, hex(2)); break;
        case 'u': AppendUtf8(out, hex(4)); break;
        case 'U': AppendUtf8(out, hex(8)); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i) v = v * 8 + static_cast<char32_t>(src_[i] - '0');
            AppendUtf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tok.type = TokenType::kString;
    tok.text = std::move(out);
    tokens_.push_back(std::move(tok));
    return i + 1;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

std::string NormalizeNewlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> Tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(NormalizeNewlines(source, options.keep_trailing_newline), options).Run();
}

}  // namespace sparkserve::text::jinja
