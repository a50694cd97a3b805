// Template syntax tree: expression and statement nodes produced by the parser, walked by the
// evaluator. Nodes are generic (a kind plus children) to keep the evaluator a pair of switches.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/chat/jinja/error.h"
#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,     // literal
  kName,        // name
  kList,        // children
  kTuple,       // children
  kDict,        // children: key0, value0, key1, value1, ...
  kGetAttr,     // children[0] . name
  kGetItem,     // children[0] [ children[1] ]
  kSlice,       // children[0] [ children[1] : children[2] : children[3] ] (null = omitted)
  kCall,        // children[0] ( children[1..], kwargs )
  kFilter,      // children[0] | name ( children[1..], kwargs )
  kTest,        // children[0] is [not] name ( children[1..], kwargs )
  kUnary,       // op children[0]: "not", "-", "+"
  kBinary,      // children[0] op children[1]: arithmetic, "~", "and", "or"
  kCompare,     // children[0] ops[0] children[1] ops[1] children[2] ... (chained like Python)
  kCondExpr,    // children[1] if children[0] else children[2] (children[2] may be null)
  kBlockInput,  // the rendered body of a {% filter %} block
};

struct Expr {
  ExprKind kind;
  SourcePos pos;
  Value literal;
  std::string name;  // variable, attribute, filter or test name; operator for kUnary/kBinary
  bool negated = false;  // kTest: `is not`
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

enum class StmtKind {
  kData,       // text
  kOutput,     // {{ expr }}
  kIf,         // conditions[i] -> bodies[i]; bodies.back() is the else body when it has no condition
  kFor,        // targets in expr [if condition] body [else else_body]
  kSet,        // targets (or ns.attr) = expr
  kSetBlock,   // {% set target %} body {% endset %}, optional filter (kBlockInput-rooted)
  kMacro,      // name(params=defaults) body
  kFilterBlock,
  kBreak,
  kContinue,
  kWith,       // assignments, body
  kScope,      // a plain body (generation, block)
  kCallBlock,  // {% call(targets=defaults) expr(...) %} body: expr gets `caller` rendering body
};

struct Stmt {
  StmtKind kind;
  SourcePos pos;
  std::string text;                  // kData
  ExprPtr expr;                      // kOutput/kSet value, kFor iterable, kSetBlock/kFilterBlock filter
  ExprPtr condition;                 // kFor loop filter
  std::vector<std::string> targets;  // kFor/kSet/kSetBlock names; kMacro parameter names
  bool unpack = false;               // targets came from a tuple (`a, b`)
  std::string attr;                  // kSet/kSetBlock: namespace attribute (`ns.attr`), targets[0] = ns
  std::string name;                  // kMacro name
  std::vector<ExprPtr> defaults;     // kMacro: default per parameter (null = required)
  std::vector<ExprPtr> conditions;   // kIf
  std::vector<Body> bodies;          // kIf branches; kFor/kMacro/kSetBlock/...: bodies[0], else: bodies[1]
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kWith
  bool uses_varargs = false;         // kMacro body reads `varargs`
  bool uses_kwargs = false;          // kMacro body reads `kwargs`
  bool uses_caller = false;          // kMacro body reads `caller`
};

}  // namespace sparkserve::text::jinja
