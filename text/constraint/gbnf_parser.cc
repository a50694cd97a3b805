// GBNF text -> Grammar: a recursive-descent parser following llama.cpp's line rules.
#include "text/constraint/gbnf_parser.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "fmt/format.h"

namespace sparkserve::text::constraint {
namespace {

constexpr int32_t kMaxRepeat = 10000;
// Parenthesised groups nested deeper are refused: the parser, and everything that walks the
// expression after it, recurses once per level (100,000 '(' must not overflow the stack).
constexpr int32_t kMaxGroupNesting = 64;

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  absl::StatusOr<Grammar> Parse(std::string_view root) {
    SkipSpace(true);
    while (ok() && pos_ < s_.size()) ParseRule();
    if (!ok()) return absl::InvalidArgumentError(error_);
    for (int32_t r = 0; r < g_.num_rules(); ++r) {
      if (!defined_[static_cast<size_t>(r)]) {
        return absl::InvalidArgumentError(fmt::format("invalid grammar: rule '{}' is used but never defined (line {})",
                                                      g_.name(r), first_use_line_[static_cast<size_t>(r)]));
      }
    }
    std::optional<int32_t> r = g_.Find(root);
    if (!r) return absl::InvalidArgumentError(fmt::format("invalid grammar: there is no '{}' rule to start from", root));
    g_.set_root(*r);
    return std::move(g_);
  }

 private:
  bool ok() const { return error_.empty(); }
  void Fail(const std::string& msg) {
    if (!ok()) return;
    error_ = fmt::format("invalid grammar (line {}): {}", Line(), msg);
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

  void SkipSpace(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  size_t Line() const {
    return 1 + static_cast<size_t>(std::count(s_.begin(), s_.begin() + static_cast<std::ptrdiff_t>(std::min(pos_, s_.size())), '\n'));
  }

  int32_t RuleId(const std::string& name) {
    if (std::optional<int32_t> r = g_.Find(name)) return *r;
    defined_.push_back(false);
    first_use_line_.push_back(Line());
    return g_.AddRule(name);
  }

  void ParseRule() {
    const size_t start = pos_;
    while (pos_ < s_.size() && IsWordChar(s_[pos_])) ++pos_;
    if (pos_ == start) return Fail(fmt::format("expected a rule name, found '{}'", Peek()));
    const std::string name(s_.substr(start, pos_ - start));
    SkipSpace(false);
    if (s_.substr(pos_, 3) != "::=") return Fail(fmt::format("expected '::=' after rule name '{}'", name));
    pos_ += 3;
    SkipSpace(true);
    ExprPtr body = ParseAlternatives(false);
    if (!ok()) return;
    const int32_t id = RuleId(name);
    if (defined_[static_cast<size_t>(id)]) return Fail(fmt::format("rule '{}' is defined twice", name));
    defined_[static_cast<size_t>(id)] = true;
    g_.SetBody(id, std::move(body));
    if (Peek() == '\r') ++pos_;
    if (Peek() == '\n') {
      ++pos_;
    } else if (pos_ < s_.size()) {
      return Fail(fmt::format("unexpected '{}' in rule '{}' (a rule ends at the end of its line)", Peek(), name));
    }
    SkipSpace(true);
  }

  ExprPtr ParseAlternatives(bool nested) {
    std::vector<ExprPtr> alts{ParseSequence(nested)};
    while (ok() && Peek() == '|') {
      ++pos_;
      SkipSpace(true);
      alts.push_back(ParseSequence(nested));
    }
    return alts.size() == 1 ? alts[0] : Choice(std::move(alts));
  }

  ExprPtr ParseSequence(bool nested) {
    std::vector<ExprPtr> items;
    while (ok() && pos_ < s_.size()) {
      const char c = Peek();
      ExprPtr item;
      if (c == '"') {
        item = ParseLiteral();
      } else if (c == '[') {
        item = ParseClass();
      } else if (c == '(') {
        if (depth_ >= kMaxGroupNesting) {
          Fail(fmt::format("groups nested deeper than {} levels", kMaxGroupNesting));
          return Empty();
        }
        ++pos_;
        SkipSpace(true);
        ++depth_;
        item = ParseAlternatives(true);
        --depth_;
        if (!ok()) return Empty();
        if (Peek() != ')') {
          Fail("expected ')'");
          return Empty();
        }
        ++pos_;
      } else if (c == '.') {
        ++pos_;
        item = AnyChar();
      } else if (IsWordChar(c)) {
        const size_t start = pos_;
        while (pos_ < s_.size() && IsWordChar(s_[pos_])) ++pos_;
        // "name ::=" here means the previous rule ended without a newline: let ParseRule complain.
        size_t look = pos_;
        while (look < s_.size() && (s_[look] == ' ' || s_[look] == '\t')) ++look;
        if (s_.substr(look, 3) == "::=") {
          pos_ = start;
          Fail(fmt::format("rule '{}' starts on the line of the previous rule", s_.substr(start, look - start)));
          return Empty();
        }
        item = RuleRef(RuleId(std::string(s_.substr(start, pos_ - start))));
      } else {
        break;
      }
      if (!ok()) return Empty();
      item = ParseRepetition(std::move(item));
      items.push_back(std::move(item));
      SkipSpace(nested);
    }
    return Seq(std::move(items));
  }

  std::optional<int32_t> Number() {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_] - '0');
      if (v > kMaxRepeat) {
        Fail(fmt::format("a repetition count above {}", kMaxRepeat));
        return std::nullopt;
      }
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int32_t>(v);
  }

  ExprPtr ParseRepetition(ExprPtr item) {
    const char c = Peek();
    if (c == '*') {
      ++pos_;
      return Star(std::move(item));
    }
    if (c == '+') {
      ++pos_;
      return Plus(std::move(item));
    }
    if (c == '?') {
      ++pos_;
      return Optional(std::move(item));
    }
    if (c != '{') return item;
    ++pos_;
    SkipSpace(false);
    std::optional<int32_t> lo = Number();
    if (!lo) {
      Fail("expected a number after '{'");
      return item;
    }
    SkipSpace(false);
    int32_t hi = *lo;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      std::optional<int32_t> h = Number();
      hi = h ? *h : -1;
      SkipSpace(false);
    }
    if (Peek() != '}') {
      Fail("expected '}' to close the repetition");
      return item;
    }
    ++pos_;
    if (hi >= 0 && hi < *lo) {
      Fail(fmt::format("repetition {{{},{}}} has max below min", *lo, hi));
      return item;
    }
    return Repeat(std::move(item), *lo, hi);
  }

  // One (possibly escaped) character of a literal or class, as a code point.
  std::optional<uint32_t> Char() {
    if (pos_ >= s_.size()) {
      Fail("unexpected end of the grammar");
      return std::nullopt;
    }
    auto c = static_cast<unsigned char>(s_[pos_]);
    if (c != '\\') {
      const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      if (n == 0 || pos_ + static_cast<size_t>(n) > s_.size()) {
        Fail("the grammar is not valid UTF-8");
        return std::nullopt;
      }
      uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(k)]) & 0x3F);
      pos_ += static_cast<size_t>(n);
      return cp;
    }
    ++pos_;
    const char e = Peek();
    ++pos_;
    auto hex = [&](int digits) -> std::optional<uint32_t> {
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const char h = Peek();
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) {
          Fail(fmt::format("\\{} needs {} hex digits", e, digits));
          return std::nullopt;
        }
        v = v * 16 + static_cast<uint32_t>(d);
        ++pos_;
      }
      if (v > kMaxCodepoint) {
        Fail("a code point above U+10FFFF");
        return std::nullopt;
      }
      return v;
    };
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
        return static_cast<uint32_t>(e);
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default:
        Fail(fmt::format("unknown escape '\\{}'", e));
        return std::nullopt;
    }
  }

  ExprPtr ParseLiteral() {
    ++pos_;  // '"'
    std::string bytes;
    while (ok()) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') {
        Fail("unterminated string literal");
        return Empty();
      }
      if (s_[pos_] == '"') {
        ++pos_;
        break;
      }
      std::optional<uint32_t> cp = Char();
      if (!cp) return Empty();
      AppendUtf8(*cp, bytes);
    }
    return Literal(bytes);
  }

  ExprPtr ParseClass() {
    ++pos_;  // '['
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    while (ok()) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') {
        Fail("unterminated character class");
        return Empty();
      }
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      std::optional<uint32_t> lo = Char();
      if (!lo) return Empty();
      uint32_t hi = *lo;
      if (Peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']' && s_[pos_ + 1] != '\n') {
        ++pos_;
        std::optional<uint32_t> h = Char();
        if (!h) return Empty();
        if (*h < *lo) {
          Fail("a character range whose end is below its start");
          return Empty();
        }
        hi = *h;
      }
      ranges.push_back({*lo, hi});
    }
    return CharSet(std::move(ranges), negate);
  }

  std::string_view s_;
  size_t pos_ = 0;
  int32_t depth_ = 0;  // groups open at pos_
  Grammar g_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_line_;
  std::string error_;
};

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(std::string_view text, std::string_view root) {
  return GbnfParser(text).Parse(root);
}

}  // namespace sparkserve::text::constraint
