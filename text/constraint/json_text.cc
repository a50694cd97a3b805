// JSON's text as grammar expressions (see json_text.h).
#include "text/constraint/json_text.h"

#include <algorithm>

#include "fmt/format.h"

namespace sparkserve::text::constraint {
namespace {

ExprPtr HexDigit() { return CharSet({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}); }

}  // namespace

// Raw characters of a JSON string: anything but '"', '\' and control characters.
std::vector<CodepointRange> RawStringChars() { return {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}}; }

// One character of a JSON string: raw, or an escape (\u escapes of surrogates excluded, so every
// unit is exactly one character of the decoded string, as maxLength counts them).
ExprPtr JsonChar() {
  static const ExprPtr c = Choice(
      {CharSet(RawStringChars()),
       Seq({Literal("\\"),
            Choice({CharSet({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                    Seq({Literal("u"),
                         Choice({Seq({CharSet({{'0', '9'}, {'a', 'c'}, {'A', 'C'}}), HexDigit(), HexDigit(), HexDigit()}),
                                 Seq({CharSet({{'d', 'd'}, {'D', 'D'}}), CharSet({{'0', '7'}}), HexDigit(), HexDigit()}),
                                 Seq({CharSet({{'e', 'f'}, {'E', 'F'}}), HexDigit(), HexDigit(), HexDigit()})})})})})});
  return c;
}

// The JSON-escaped form of a character (for characters that cannot appear raw).
std::string EscapedChar(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return fmt::format("\\u{:04x}", cp);
  }
}

// A regex over a string's value -> the same over its JSON text (specials escaped).
ExprPtr JsonEscape(const ExprPtr& e) {
  switch (e->kind) {
    case Expr::Kind::kEmpty:
    case Expr::Kind::kRuleRef: return e;
    case Expr::Kind::kLiteral: {
      std::string out;
      for (unsigned char c : e->literal) {
        if (c == '"' || c == '\\' || c < 0x20) {
          out += EscapedChar(c);
        } else {
          out.push_back(static_cast<char>(c));
        }
      }
      return Literal(out);
    }
    case Expr::Kind::kCharSet: {
      std::vector<CodepointRange> plain;
      std::vector<ExprPtr> alts;
      for (const CodepointRange& r : e->ranges) {
        for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 0x5C); ++cp) {
          if (cp < 0x20 || cp == '"' || cp == '\\') alts.push_back(Literal(EscapedChar(cp)));
        }
        for (const CodepointRange& raw : RawStringChars()) {
          const uint32_t lo = std::max(r.lo, raw.lo), hi = std::min(r.hi, raw.hi);
          if (lo <= hi) plain.push_back({lo, hi});
        }
      }
      if (!plain.empty()) alts.insert(alts.begin(), CharSet(std::move(plain)));
      return Choice(std::move(alts));
    }
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice: {
      std::vector<ExprPtr> items;
      for (const ExprPtr& i : e->items) items.push_back(JsonEscape(i));
      return e->kind == Expr::Kind::kSequence ? Seq(std::move(items)) : Choice(std::move(items));
    }
    case Expr::Kind::kRepeat: return Repeat(JsonEscape(e->items[0]), e->min, e->max);
  }
  return e;
}

ExprPtr JsonWhitespace() {
  static const ExprPtr ws = Optional(
      Choice({Literal(" "), Seq({Literal("\n"), Repeat(CharSet({{' ', ' '}, {'\t', '\t'}}), 0, kMaxIndent)})}));
  return ws;
}

ExprPtr JsonStringChars(int32_t min, int32_t max) { return Repeat(JsonChar(), min, max); }

}  // namespace sparkserve::text::constraint
