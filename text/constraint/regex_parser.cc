// Regex -> Expr: a recursive-descent parser over the pattern's code points.
#include "text/constraint/regex_parser.h"

#include <optional>
#include <vector>

#include "fmt/format.h"

namespace sparkserve::text::constraint {
namespace {

constexpr int32_t kMaxRepeat = 10000;
// Groups nested deeper are refused: the parser, and everything that walks the expression after it,
// recurses once per level (a pattern of 100,000 '(' must not overflow the stack).
constexpr int32_t kMaxGroupNesting = 64;

std::vector<CodepointRange> DigitRanges() { return {{'0', '9'}}; }
std::vector<CodepointRange> WordRanges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// Python's str.isspace() characters (what \s matches in a str pattern).
std::vector<CodepointRange> SpaceRanges() {
  return {{0x09, 0x0D}, {0x1C, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
}
// ASCII characters outside `ranges`.
std::vector<CodepointRange> AsciiComplement(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> all = NormalizeRanges(ranges, /*negate=*/true);
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : all) {
    if (r.lo <= 0x7F) out.push_back({r.lo, std::min<uint32_t>(r.hi, 0x7F)});
  }
  return out;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : src_(pattern) {}

  absl::StatusOr<ExprPtr> Parse() {
    if (!DecodeAll()) return Error("the pattern is not valid UTF-8");
    size_t end = cps_.size();
    if (!cps_.empty() && cps_[0] == '^') pos_ = 1;
    if (end > pos_ && cps_[end - 1] == '$' && !(end >= 2 && cps_[end - 2] == '\\')) --end;
    end_ = end;
    ExprPtr e = Alternation();
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    if (pos_ < end_ && cps_[pos_] == ')') return Error(fmt::format("unbalanced ')' at offset {}", pos_));
    if (pos_ < end_) return Error(fmt::format("unexpected '{}' at offset {}", Char(cps_[pos_]), pos_));
    return e;
  }

 private:
  absl::Status Error(const std::string& msg) const {
    return absl::InvalidArgumentError(fmt::format("invalid regex: {}", msg));
  }
  void Fail(const std::string& msg) {
    if (error_.empty()) error_ = fmt::format("invalid regex: {}", msg);
  }
  static std::string Char(uint32_t cp) {
    std::string s;
    AppendUtf8(cp, s);
    return s;
  }

  bool DecodeAll() {
    size_t i = 0;
    while (i < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[i]);
      int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      if (n == 0 || i + static_cast<size_t>(n) > src_.size()) return false;
      uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (int k = 1; k < n; ++k) {
        const auto d = static_cast<unsigned char>(src_[i + static_cast<size_t>(k)]);
        if ((d >> 6) != 2) return false;
        cp = (cp << 6) | (d & 0x3F);
      }
      cps_.push_back(cp);
      i += static_cast<size_t>(n);
    }
    return true;
  }

  bool AtEnd() const { return pos_ >= end_ || !error_.empty(); }
  uint32_t Peek(size_t ahead = 0) const { return pos_ + ahead < end_ ? cps_[pos_ + ahead] : 0; }

  ExprPtr Alternation() {
    std::vector<ExprPtr> alts{Concatenation()};
    while (!AtEnd() && Peek() == '|') {
      ++pos_;
      alts.push_back(Concatenation());
    }
    return alts.size() == 1 ? alts[0] : Choice(std::move(alts));
  }

  ExprPtr Concatenation() {
    std::vector<ExprPtr> items;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      ExprPtr atom = Atom();
      if (!error_.empty()) return Empty();
      items.push_back(Quantified(std::move(atom)));
    }
    return Seq(std::move(items));
  }

  std::optional<int32_t> Number() {
    int64_t v = 0;
    size_t start = pos_;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeat) {
        Fail(fmt::format("a repetition count above {}", kMaxRepeat));
        return std::nullopt;
      }
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int32_t>(v);
  }

  ExprPtr Quantified(ExprPtr atom) {
    bool repeated = false;
    while (!AtEnd()) {
      int32_t min = 0, max = 0;
      const uint32_t c = Peek();
      if (c == '*') {
        min = 0, max = -1;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = -1;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{') {
        // Python treats a '{' that does not start a valid quantifier as a literal.
        const size_t save = pos_;
        ++pos_;
        std::optional<int32_t> lo = Number();
        std::optional<int32_t> hi;
        bool comma = false;
        if (!AtEnd() && Peek() == ',') {
          comma = true;
          ++pos_;
          hi = Number();
        }
        if (!error_.empty()) return atom;
        if (AtEnd() || Peek() != '}' || (!lo && !comma)) {
          pos_ = save;
          return atom;
        }
        ++pos_;
        min = lo.value_or(0);
        max = comma ? (hi ? *hi : -1) : min;
        if (max >= 0 && max < min) {
          Fail(fmt::format("repetition {{{},{}}} has max below min", min, max));
          return atom;
        }
      } else {
        return atom;
      }
      if (!AtEnd() && Peek() == '?') {
        ++pos_;  // lazy: the same language
      } else if (!AtEnd() && Peek() == '+') {
        Fail("possessive quantifiers are not supported");
        return atom;
      }
      if (repeated) {  // as Python's re; stacked quantifiers would also nest without bound
        Fail(fmt::format("multiple repeat at offset {} (group the repeated part first)", pos_));
        return atom;
      }
      repeated = true;
      atom = Repeat(std::move(atom), min, max);
    }
    return atom;
  }

  ExprPtr Atom() {
    const uint32_t c = Peek();
    switch (c) {
      case '(': {
        if (depth_ >= kMaxGroupNesting) {
          Fail(fmt::format("groups nested deeper than {} levels", kMaxGroupNesting));
          return Empty();
        }
        ++pos_;
        if (Peek() == '?') {
          if (Peek(1) == ':') {
            pos_ += 2;
          } else if (Peek(1) == 'P' && Peek(2) == '<') {
            pos_ += 3;
            while (!AtEnd() && Peek() != '>') ++pos_;
            if (AtEnd()) {
              Fail("unterminated group name");
              return Empty();
            }
            ++pos_;
          } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
            pos_ += 2;
            while (!AtEnd() && Peek() != '>') ++pos_;
            if (AtEnd()) {
              Fail("unterminated group name");
              return Empty();
            }
            ++pos_;
          } else {
            Fail("lookarounds, inline flags and conditionals ((?...)) are not supported");
            return Empty();
          }
        }
        ++depth_;
        ExprPtr inner = Alternation();
        --depth_;
        if (AtEnd() || Peek() != ')') {
          Fail("missing ')'");
          return Empty();
        }
        ++pos_;
        return inner;
      }
      case ')': Fail("unbalanced ')'"); return Empty();
      case '[': return Class();
      case '.':
        ++pos_;
        return CharSet({{'\n', '\n'}}, /*negate=*/true);
      case '^':
      case '$': Fail("anchors (^, $) are only supported at the start and end of the pattern"); return Empty();
      case '*':
      case '+':
      case '?': Fail(fmt::format("nothing to repeat before '{}'", Char(c))); return Empty();
      case '\\': {
        ++pos_;
        std::vector<CodepointRange> ranges;
        if (!Escape(ranges, /*in_class=*/false)) return Empty();
        return CharSet(std::move(ranges));
      }
      default:
        ++pos_;
        return Literal(Char(c));
    }
  }

  // After a backslash: the escaped character(s) as ranges. False on error.
  bool Escape(std::vector<CodepointRange>& out, bool in_class) {
    if (AtEnd()) {
      Fail("a trailing backslash");
      return false;
    }
    const uint32_t c = Peek();
    ++pos_;
    auto hex = [&](int digits) -> std::optional<uint32_t> {
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        const uint32_t h = Peek();
        int d = h >= '0' && h <= '9' ? static_cast<int>(h - '0') : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
                : h >= 'A' && h <= 'F' ? static_cast<int>(h - 'A' + 10) : -1;
        if (AtEnd() || d < 0) {
          Fail(fmt::format("\\{} needs {} hex digits", Char(c), digits));
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
    auto one = [&](uint32_t cp) {
      out.push_back({cp, cp});
      return true;
    };
    switch (c) {
      case 'd': out = DigitRanges(); return true;
      case 'w': out = WordRanges(); return true;
      case 's': out = SpaceRanges(); return true;
      case 'D': out = AsciiComplement(DigitRanges()); return true;
      case 'W': out = AsciiComplement(WordRanges()); return true;
      case 'S': out = NormalizeRanges(SpaceRanges(), /*negate=*/true); return true;
      case 'n': return one('\n');
      case 't': return one('\t');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case 'a': return one('\a');
      case '0': return one(0);
      case 'x': {
        auto v = hex(2);
        return v && one(*v);
      }
      case 'u': {
        auto v = hex(4);
        return v && one(*v);
      }
      case 'U': {
        auto v = hex(8);
        return v && one(*v);
      }
      case 'b':
        if (in_class) return one('\b');
        Fail("word boundaries (\\b) are not supported");
        return false;
      case 'B':
      case 'A':
      case 'Z':
      case 'z':
        Fail(fmt::format("the anchor \\{} is not supported", Char(c)));
        return false;
      default:
        if ((c >= '1' && c <= '9') || c == 'g' || c == 'k') {
          Fail("backreferences are not supported");
          return false;
        }
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
          Fail(fmt::format("unknown escape \\{}", Char(c)));
          return false;
        }
        return one(c);
    }
  }

  ExprPtr Class() {
    ++pos_;  // '['
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodepointRange> ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) {
        Fail("missing ']'");
        return Empty();
      }
      uint32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      std::vector<CodepointRange> item;
      ++pos_;
      if (c == '\\') {
        if (!Escape(item, /*in_class=*/true)) return Empty();
      } else {
        item.push_back({c, c});
      }
      // A range: single character, '-', single character (not ']').
      if (item.size() == 1 && item[0].lo == item[0].hi && !AtEnd() && Peek() == '-' && Peek(1) != ']' && pos_ + 1 < end_) {
        ++pos_;
        uint32_t hi = Peek();
        ++pos_;
        if (hi == '\\') {
          std::vector<CodepointRange> h;
          if (!Escape(h, /*in_class=*/true)) return Empty();
          if (h.size() != 1 || h[0].lo != h[0].hi) {
            Fail("a class shorthand cannot end a range");
            return Empty();
          }
          hi = h[0].lo;
        }
        if (hi < item[0].lo) {
          Fail(fmt::format("bad character range {}-{}", Char(item[0].lo), Char(hi)));
          return Empty();
        }
        item[0].hi = hi;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    return CharSet(std::move(ranges), negate);
  }

  std::string_view src_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  size_t end_ = 0;
  int32_t depth_ = 0;  // groups open at pos_
  std::string error_;
};

}  // namespace

absl::StatusOr<ExprPtr> ParseRegex(std::string_view pattern) { return RegexParser(pattern).Parse(); }

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  absl::StatusOr<ExprPtr> e = ParseRegex(pattern);
  if (!e.ok()) return e.status();
  Grammar g;
  const int32_t root = g.AddRule("root");
  g.SetBody(root, *e);
  g.set_root(root);
  return g;
}

}  // namespace sparkserve::text::constraint
