// Evaluator: walks the syntax tree with jinja2's scoping (a for-loop iteration, macro call, with
// and set-block get their own scope; if does not), producing the rendered text. Also the entry
// points filters, tests and methods call back into (attribute lookup, calls, filter/test dispatch).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "text/chat/jinja/ast.h"
#include "text/chat/jinja/template.h"
#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  std::unordered_map<std::string, Value> vars_;
  std::shared_ptr<Scope> parent_;
};

using FilterFn = Value (*)(Evaluator&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Evaluator&, const Value& input, CallArgs& args);
const FilterFn* FindFilter(const std::string& name);  // builtin_filters.cc
const TestFn* FindTest(const std::string& name);      // builtin_tests.cc
// A bound str/dict/list method (`"a".upper`), or nullopt (methods.cc).
std::optional<Value> FindMethod(const Value& obj, const std::string& name);
// range, dict, namespace, joiner, cycler, raise_exception, strftime_now (builtin_globals.cc).
void AddBuiltinGlobals(Scope& scope);

class Evaluator {
 public:
  explicit Evaluator(const RenderLimits& limits = {});

  // Renders `body` with `root` as the outermost scope (globals and render variables).
  std::string Render(const Body& body, const std::shared_ptr<Scope>& root);

  // `obj.name` and `obj[key]` with jinja2's sandboxed lookup order.
  Value GetAttr(const Value& obj, const std::string& name) const;
  Value GetItem(const Value& obj, const Value& key) const;
  Value Call(const Value& callee, CallArgs& args);
  Value CallFilter(const std::string& name, const Value& input, CallArgs& args);
  bool CallTest(const std::string& name, const Value& input, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  Flow ExecBody(const Body& body, const ScopePtr& scope, std::string& out);
  Flow Exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow ExecFor(const Stmt& s, const ScopePtr& scope, std::string& out);
  void ExecSet(const Stmt& s, const ScopePtr& scope, Value value);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope);
  Value Eval(const Expr& e, const ScopePtr& scope);
  Value EvalInner(const Expr& e, const ScopePtr& scope);
  CallArgs EvalArgs(const Expr& e, size_t first_arg, const ScopePtr& scope);

  // Counts a loop iteration (or a macro call) against the limits; throws past one.
  void Tick();
  void CountOutput(size_t bytes);

  int depth_ = 0;
  RenderLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t iterations_ = 0;
  size_t emitted_ = 0;
  std::vector<std::string> block_inputs_;  // bodies of enclosing {% filter %} / {% set %} blocks
};

}  // namespace sparkserve::text::jinja
