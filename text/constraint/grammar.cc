// Grammar expressions, rules and their canonical text.
#include "text/constraint/grammar.h"

#include <algorithm>

#include "fmt/format.h"

namespace sparkserve::text::constraint {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

ExprPtr Make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

void PrintCodepoint(uint32_t cp, std::string& out) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp < 0x20 || cp == 0x7F || cp > 0x7E) {
    out += cp <= 0xFF ? fmt::format("\\x{:02X}", cp) : cp <= 0xFFFF ? fmt::format("\\u{:04X}", cp)
                                                                    : fmt::format("\\U{:08X}", cp);
  } else {
    out.push_back(static_cast<char>(cp));
  }
}

void PrintLiteral(std::string_view bytes, std::string& out) {
  out.push_back('"');
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

void Print(const Expr& e, const Grammar& g, std::string& out) {
  switch (e.kind) {
    case Expr::Kind::kEmpty: out += "\"\""; return;
    case Expr::Kind::kLiteral: PrintLiteral(e.literal, out); return;
    case Expr::Kind::kCharSet:
      out.push_back('[');
      for (const CodepointRange& r : e.ranges) {
        PrintCodepoint(r.lo, out);
        if (r.hi != r.lo) {
          out.push_back('-');
          PrintCodepoint(r.hi, out);
        }
      }
      out.push_back(']');
      return;
    case Expr::Kind::kSequence:
    case Expr::Kind::kChoice:
      out.push_back('(');
      for (size_t i = 0; i < e.items.size(); ++i) {
        if (i > 0) out += e.kind == Expr::Kind::kChoice ? " | " : " ";
        Print(*e.items[i], g, out);
      }
      out.push_back(')');
      return;
    case Expr::Kind::kRepeat:
      out.push_back('(');
      Print(*e.items[0], g, out);
      out += e.max < 0 ? fmt::format("){{{},}}", e.min) : fmt::format("){{{},{}}}", e.min, e.max);
      return;
    case Expr::Kind::kRuleRef:
      out += e.rule >= 0 && e.rule < g.num_rules() ? g.name(e.rule) : fmt::format("<rule {}>", e.rule);
      return;
  }
}

absl::Status ValidateExpr(const Expr& e, const Grammar& g, int32_t rule) {
  switch (e.kind) {
    case Expr::Kind::kRuleRef:
      if (e.rule < 0 || e.rule >= g.num_rules()) {
        return absl::InvalidArgumentError(fmt::format("rule '{}' refers to an undefined rule", g.name(rule)));
      }
      return absl::OkStatus();
    case Expr::Kind::kRepeat:
      if (e.items.size() != 1 || e.min < 0 || (e.max >= 0 && e.max < e.min)) {
        return absl::InvalidArgumentError(fmt::format("rule '{}' has a repetition with bad bounds", g.name(rule)));
      }
      break;
    default: break;
  }
  for (const ExprPtr& item : e.items) {
    if (!item) return absl::InvalidArgumentError(fmt::format("rule '{}' has an empty expression", g.name(rule)));
    if (absl::Status s = ValidateExpr(*item, g, rule); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges, bool negate) {
  for (CodepointRange& r : ranges) {
    r.hi = std::min(r.hi, kMaxCodepoint);
  }
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(), [](const CodepointRange& r) { return r.lo > r.hi; }),
               ranges.end());
  std::sort(ranges.begin(), ranges.end(), [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<CodepointRange> complement;
    uint32_t next = 0;
    for (const CodepointRange& r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodepoint) complement.push_back({next, kMaxCodepoint});
    merged = std::move(complement);
  }
  // Surrogates have no UTF-8 encoding.
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

ExprPtr Empty() { return Make(Expr{}); }

ExprPtr Literal(std::string_view bytes) {
  if (bytes.empty()) return Empty();
  Expr e;
  e.kind = Expr::Kind::kLiteral;
  e.literal = std::string(bytes);
  return Make(std::move(e));
}

ExprPtr CharSet(std::vector<CodepointRange> ranges, bool negate) {
  Expr e;
  e.kind = Expr::Kind::kCharSet;
  e.ranges = NormalizeRanges(std::move(ranges), negate);
  return Make(std::move(e));
}

ExprPtr AnyChar() { return CharSet({}, /*negate=*/true); }

ExprPtr Seq(std::vector<ExprPtr> items) {
  Expr e;
  e.kind = Expr::Kind::kSequence;
  for (ExprPtr& item : items) {
    if (item->kind == Expr::Kind::kEmpty) continue;
    if (item->kind == Expr::Kind::kSequence) {
      e.items.insert(e.items.end(), item->items.begin(), item->items.end());
    } else if (item->kind == Expr::Kind::kLiteral && !e.items.empty() &&
               e.items.back()->kind == Expr::Kind::kLiteral) {
      e.items.back() = Literal(e.items.back()->literal + item->literal);
    } else {
      e.items.push_back(std::move(item));
    }
  }
  if (e.items.empty()) return Empty();
  if (e.items.size() == 1) return e.items[0];
  return Make(std::move(e));
}

ExprPtr Choice(std::vector<ExprPtr> items) {
  Expr e;
  e.kind = Expr::Kind::kChoice;
  for (ExprPtr& item : items) {
    if (item->kind == Expr::Kind::kChoice) {
      e.items.insert(e.items.end(), item->items.begin(), item->items.end());
    } else {
      e.items.push_back(std::move(item));
    }
  }
  if (e.items.size() == 1) return e.items[0];
  return Make(std::move(e));
}

ExprPtr Repeat(ExprPtr item, int32_t min, int32_t max) {
  if (max == 0) return Empty();
  if (min == 1 && max == 1) return item;
  if (item->kind == Expr::Kind::kEmpty) return item;
  Expr e;
  e.kind = Expr::Kind::kRepeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return Make(std::move(e));
}

ExprPtr Optional(ExprPtr item) { return Repeat(std::move(item), 0, 1); }
ExprPtr Star(ExprPtr item) { return Repeat(std::move(item), 0, -1); }
ExprPtr Plus(ExprPtr item) { return Repeat(std::move(item), 1, -1); }

ExprPtr RuleRef(int32_t rule) {
  Expr e;
  e.kind = Expr::Kind::kRuleRef;
  e.rule = rule;
  return Make(std::move(e));
}

int32_t Grammar::AddRule(std::string name) {
  names_.push_back(std::move(name));
  bodies_.push_back(nullptr);
  return static_cast<int32_t>(names_.size()) - 1;
}

int32_t Grammar::AddUniqueRule(std::string_view base) {
  std::string name(base);
  for (int i = 2; Find(name).has_value(); ++i) name = fmt::format("{}-{}", base, i);
  return AddRule(std::move(name));
}

void Grammar::SetBody(int32_t rule, ExprPtr body) { bodies_[static_cast<size_t>(rule)] = std::move(body); }

std::optional<int32_t> Grammar::Find(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

absl::Status Grammar::Validate() const {
  if (root_ < 0 || root_ >= num_rules()) return absl::InvalidArgumentError("the grammar has no root rule");
  for (int32_t r = 0; r < num_rules(); ++r) {
    if (!bodies_[static_cast<size_t>(r)]) {
      return absl::InvalidArgumentError(fmt::format("rule '{}' is used but never defined", names_[static_cast<size_t>(r)]));
    }
    if (absl::Status s = ValidateExpr(*bodies_[static_cast<size_t>(r)], *this, r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string Grammar::ToString() const {
  std::string out = fmt::format("# root: {}\n", root_ >= 0 && root_ < num_rules() ? names_[static_cast<size_t>(root_)] : "");
  for (int32_t r = 0; r < num_rules(); ++r) {
    out += names_[static_cast<size_t>(r)];
    out += " ::= ";
    if (bodies_[static_cast<size_t>(r)]) Print(*bodies_[static_cast<size_t>(r)], *this, out);
    out.push_back('\n');
  }
  return out;
}

}  // namespace sparkserve::text::constraint
