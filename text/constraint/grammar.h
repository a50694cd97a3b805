// Grammar: the constraint engine's common form. A context-free grammar over UTF-8 text whose
// terminals are byte strings and code-point sets; rules refer to each other by index. The JSON
// schema, regex, choice and GBNF front ends all produce one; GrammarAutomaton compiles it.
//
//   Grammar g;
//   int32_t root = g.AddRule("root");
//   g.SetBody(root, Seq({Literal("["), Repeat(CharSet({{'0', '9'}}), 1, 3), Literal("]")}));
//   g.set_root(root);
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace sparkserve::text::constraint {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {  // inclusive
  uint32_t lo = 0;
  uint32_t hi = 0;
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t {
    kEmpty,     // matches ""
    kLiteral,   // `literal`, byte for byte
    kCharSet,   // one code point in `ranges` (UTF-8 encoded; surrogates never match)
    kSequence,  // `items` one after another
    kChoice,    // one of `items`
    kRepeat,    // items[0] between `min` and `max` times (max < 0: unbounded)
    kRuleRef,   // the rule `rule`
  };
  Kind kind = Kind::kEmpty;
  std::string literal;
  std::vector<CodepointRange> ranges;  // sorted, disjoint, not touching, surrogates removed
  std::vector<ExprPtr> items;
  int32_t min = 0;
  int32_t max = 0;
  int32_t rule = -1;
};

ExprPtr Empty();
ExprPtr Literal(std::string_view bytes);
// The code points in `ranges` (any order, may overlap); `negate`: every other scalar value.
ExprPtr CharSet(std::vector<CodepointRange> ranges, bool negate = false);
ExprPtr AnyChar();  // any Unicode scalar value
ExprPtr Seq(std::vector<ExprPtr> items);
ExprPtr Choice(std::vector<ExprPtr> items);
ExprPtr Repeat(ExprPtr item, int32_t min, int32_t max);  // max < 0: unbounded
ExprPtr Optional(ExprPtr item);
ExprPtr Star(ExprPtr item);
ExprPtr Plus(ExprPtr item);
ExprPtr RuleRef(int32_t rule);

// Sorted, merged, surrogate-free ranges; `negate` complements them over [0, 0x10FFFF].
std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges, bool negate);

class Grammar {
 public:
  // Declares a rule (body set later with SetBody); names must be unique.
  int32_t AddRule(std::string name);
  // Declares a rule with a name derived from `base` that no other rule has yet.
  int32_t AddUniqueRule(std::string_view base);
  void SetBody(int32_t rule, ExprPtr body);
  std::optional<int32_t> Find(std::string_view name) const;

  int32_t num_rules() const { return static_cast<int32_t>(names_.size()); }
  const std::string& name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }
  const ExprPtr& body(int32_t rule) const { return bodies_[static_cast<size_t>(rule)]; }
  int32_t root() const { return root_; }
  void set_root(int32_t rule) { root_ = rule; }

  // Every rule has a body, references are in range, the root is set.
  absl::Status Validate() const;
  // Canonical GBNF-like text (rules in index order): equal grammars print equal text, so the text
  // is the compiled-grammar cache key.
  std::string ToString() const;

 private:
  std::vector<std::string> names_;
  std::vector<ExprPtr> bodies_;
  int32_t root_ = -1;
};

// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void AppendUtf8(uint32_t cp, std::string& out);

}  // namespace sparkserve::text::constraint
