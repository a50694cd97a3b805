// Evaluator: statements, expressions, scoping, macros and loops.
#include "text/chat/jinja/evaluator.h"

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/operators.h"

namespace sparkserve::text::jinja {
namespace {

constexpr int kMaxCallDepth = 200;

std::string ObjectTypeRepr(const Value& obj) {
  if (obj.is_none()) return "'None'";
  return fmt::format("'{} object'", obj.TypeName());
}

Value NoAttribute(const Value& obj, const std::string& name) {
  return Value::Undefined(fmt::format("{} has no attribute '{}'", ObjectTypeRepr(obj), name));
}

}  // namespace

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

Evaluator::Evaluator(const RenderLimits& limits)
    : limits_(limits), deadline_(std::chrono::steady_clock::now() + limits.max_render_time) {}

void Evaluator::Tick() {
  if (++iterations_ > limits_.max_loop_iterations) {
    ThrowRuntime(fmt::format("the template ran more than {} loop iterations", limits_.max_loop_iterations));
  }
  if ((iterations_ & 255) == 0 && std::chrono::steady_clock::now() > deadline_) {
    ThrowRuntime(fmt::format("rendering the template took longer than {} ms", limits_.max_render_time.count()));
  }
}

void Evaluator::CountOutput(size_t bytes) {
  emitted_ += bytes;
  if (emitted_ > limits_.max_output_bytes) {
    ThrowRuntime(fmt::format("the template's output exceeds {} bytes", limits_.max_output_bytes));
  }
}

std::string Evaluator::Render(const Body& body, const std::shared_ptr<Scope>& root) {
  std::string out;
  ExecBody(body, std::make_shared<Scope>(root), out);
  return out;
}

Evaluator::Flow Evaluator::ExecBody(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& s : body) {
    Flow f = Exec(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::Exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::kData:
        CountOutput(s.text.size());
        out += s.text;
        return Flow::kNormal;
      case StmtKind::kOutput: {
        std::string text = Eval(*s.expr, scope).Str();
        CountOutput(text.size());
        out += text;
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          if (Eval(*s.conditions[i], scope).Truthy()) return ExecBody(s.bodies[i], scope, out);
        }
        if (s.bodies.size() > s.conditions.size()) return ExecBody(s.bodies.back(), scope, out);
        return Flow::kNormal;
      case StmtKind::kFor:
        return ExecFor(s, scope, out);
      case StmtKind::kSet:
        ExecSet(s, scope, Eval(*s.expr, scope));
        return Flow::kNormal;
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock: {
        std::string body;
        ExecBody(s.bodies[0], std::make_shared<Scope>(scope), body);
        Value value(body);
        if (s.expr) {
          block_inputs_.push_back(std::move(body));
          try {
            value = Eval(*s.expr, scope);
          } catch (...) {
            block_inputs_.pop_back();
            throw;
          }
          block_inputs_.pop_back();
        }
        if (s.kind == StmtKind::kSetBlock) {
          ExecSet(s, scope, std::move(value));
        } else {
          out += value.Str();
        }
        return Flow::kNormal;
      }
      case StmtKind::kMacro:
        scope->Set(s.name, MakeMacro(s, scope));
        return Flow::kNormal;
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kWith: {
        auto inner = std::make_shared<Scope>(scope);
        for (const auto& [name, expr] : s.assignments) inner->Set(name, Eval(*expr, scope));
        return ExecBody(s.bodies[0], inner, out);
      }
      case StmtKind::kScope:
        return ExecBody(s.bodies[0], std::make_shared<Scope>(scope), out);
      case StmtKind::kCallBlock: {
        Value caller = MakeMacro(s, scope);
        const Expr& call = *s.expr;
        Value callee = Eval(*call.children[0], scope);
        CallArgs args = EvalArgs(call, 1, scope);
        args.keyword.emplace_back("caller", std::move(caller));
        out += Call(callee, args).Str();
        return Flow::kNormal;
      }
    }
  } catch (TemplateError& e) {
    e.set_pos_if_missing(s.pos);
    throw;
  }
  return Flow::kNormal;
}

namespace {

void BindTargets(const Stmt& s, Scope& scope, const Value& value) {
  if (!s.unpack) {
    scope.Set(s.targets[0], value);
    return;
  }
  ValueList parts = Iterate(value);
  if (parts.size() < s.targets.size()) {
    ThrowRuntime(fmt::format("not enough values to unpack (expected {}, got {})", s.targets.size(), parts.size()));
  }
  if (parts.size() > s.targets.size()) {
    ThrowRuntime(fmt::format("too many values to unpack (expected {})", s.targets.size()));
  }
  for (size_t i = 0; i < parts.size(); ++i) scope.Set(s.targets[i], parts[i]);
}

}  // namespace

void Evaluator::ExecSet(const Stmt& s, const ScopePtr& scope, Value value) {
  if (s.attr.empty()) {
    BindTargets(s, *scope, value);
    return;
  }
  const Value* ns = scope->Find(s.targets[0]);
  if (ns == nullptr || !ns->is_object() || !ns->object().assignable) {
    ThrowRuntime("cannot assign attribute on non-namespace object");
  }
  ns->object().Set(s.attr, std::move(value));
}

Evaluator::Flow Evaluator::ExecFor(const Stmt& s, const ScopePtr& scope, std::string& out) {
  ValueList items = Iterate(Eval(*s.expr, scope));
  if (s.condition) {
    ValueList kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      BindTargets(s, *probe, item);
      if (Eval(*s.condition, probe).Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0) {
    if (s.bodies.size() > 1) return ExecBody(s.bodies[1], std::make_shared<Scope>(scope), out);
    return Flow::kNormal;
  }
  auto last_changed = std::make_shared<std::optional<ValueList>>();
  for (int64_t i = 0; i < n; ++i) {
    Tick();
    auto iter_scope = std::make_shared<Scope>(scope);
    BindTargets(s, *iter_scope, items[static_cast<size_t>(i)]);
    auto loop = std::make_shared<ObjectData>();
    loop->type_name = "LoopContext";
    loop->attrs = {
        {"index", Value(i + 1)},
        {"index0", Value(i)},
        {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)},
        {"first", Value(i == 0)},
        {"last", Value(i == n - 1)},
        {"length", Value(n)},
        {"depth", Value(1)},
        {"depth0", Value(0)},
        {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("there is no previous item")},
        {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::Undefined("there is no next item")},
        {"cycle", Value::Function("cycle", [i](Evaluator&, CallArgs& a) -> Value {
           if (a.positional.empty()) ThrowRuntime("no items for cycling given");
           return a.positional[static_cast<size_t>(i) % a.positional.size()];
         })},
        {"changed", Value::Function("changed", [last_changed](Evaluator&, CallArgs& a) -> Value {
           if (last_changed->has_value()) {
             const ValueList& prev = **last_changed;
             bool same = prev.size() == a.positional.size();
             for (size_t k = 0; same && k < prev.size(); ++k) same = PyEquals(prev[k], a.positional[k]);
             if (same) return Value(false);
           }
           *last_changed = a.positional;
           return Value(true);
         })},
    };
    iter_scope->Set("loop", Value::Object(loop));
    if (ExecBody(s.bodies[0], iter_scope, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Evaluator::MakeMacro(const Stmt& s, const ScopePtr& scope) {
  const Stmt* macro = &s;
  std::weak_ptr<Scope> weak_def = scope;  // the defining scope owns the macro: avoid a cycle
  return Value::Function(s.name, [macro, weak_def](Evaluator& ev, CallArgs& args) -> Value {
    ScopePtr def = weak_def.lock();
    auto inner = std::make_shared<Scope>(def);
    const size_t np = macro->targets.size();
    std::vector<bool> given(np, false);
    ValueList varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < np) {
        inner->Set(macro->targets[i], args.positional[i]);
        given[i] = true;
      } else if (macro->uses_varargs) {
        varargs.push_back(args.positional[i]);
      } else {
        ThrowRuntime(fmt::format("macro '{}' takes not more than {} argument(s)", macro->name, np));
      }
    }
    auto kwargs = std::make_shared<DictData>();
    for (const auto& [name, value] : args.keyword) {
      size_t i = 0;
      while (i < np && macro->targets[i] != name) ++i;
      if (name == "caller" && i == np) {
        if (!macro->uses_caller) ThrowRuntime(fmt::format("macro '{}' takes no keyword argument 'caller'", macro->name));
        inner->Set(name, value);
      } else if (i < np) {
        if (given[i]) ThrowRuntime(fmt::format("macro '{}' got multiple values for argument '{}'", macro->name, name));
        inner->Set(name, value);
        given[i] = true;
      } else if (macro->uses_kwargs) {
        kwargs->Set(Value(name), value);
      } else {
        ThrowRuntime(fmt::format("macro '{}' takes no keyword argument '{}'", macro->name, name));
      }
    }
    for (size_t i = 0; i < np; ++i) {
      if (given[i]) continue;
      if (macro->defaults[i]) {
        inner->Set(macro->targets[i], ev.Eval(*macro->defaults[i], inner));
      } else {
        inner->Set(macro->targets[i], Value::Undefined(fmt::format("parameter '{}' was not provided", macro->targets[i])));
      }
    }
    if (macro->uses_varargs) inner->Set("varargs", Value::Tuple(std::move(varargs)));
    if (macro->uses_kwargs) inner->Set("kwargs", Value::Dict(kwargs));
    if (ev.depth_ >= kMaxCallDepth) ThrowRuntime("maximum recursion depth exceeded");
    ev.Tick();
    ++ev.depth_;
    std::string out;
    try {
      ev.ExecBody(macro->bodies[0], inner, out);
    } catch (...) {
      --ev.depth_;
      throw;
    }
    --ev.depth_;
    return Value(std::move(out));
  });
}

Value Evaluator::Eval(const Expr& e, const ScopePtr& scope) {
  try {
    return EvalInner(e, scope);
  } catch (TemplateError& err) {
    err.set_pos_if_missing(e.pos);
    throw;
  }
}

CallArgs Evaluator::EvalArgs(const Expr& e, size_t first_arg, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first_arg; i < e.children.size(); ++i) args.positional.push_back(Eval(*e.children[i], scope));
  for (const auto& [name, expr] : e.kwargs) args.keyword.emplace_back(name, Eval(*expr, scope));
  return args;
}

Value Evaluator::EvalInner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName: {
      const Value* v = scope->Find(e.name);
      return v ? *v : Value::Undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      for (const ExprPtr& c : e.children) items.push_back(Eval(*c, scope));
      return e.kind == ExprKind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<DictData>();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = Eval(*e.children[i], scope);
        if (k.is_list() || k.is_dict()) ThrowRuntime(fmt::format("unhashable type: '{}'", k.TypeName()));
        d->Set(std::move(k), Eval(*e.children[i + 1], scope));
      }
      return Value::Dict(d);
    }
    case ExprKind::kGetAttr:
      return GetAttr(Eval(*e.children[0], scope), e.name);
    case ExprKind::kGetItem:
      return GetItem(Eval(*e.children[0], scope), Eval(*e.children[1], scope));
    case ExprKind::kSlice: {
      Value obj = Eval(*e.children[0], scope);
      auto part = [&](size_t i) { return e.children[i] ? Eval(*e.children[i], scope) : Value::None(); };
      Value start = part(1), stop = part(2), step = part(3);
      obj.RequireDefined();
      if (!obj.is_string() && !obj.is_sequence()) return Value::Undefined(fmt::format("{} has no element slice", ObjectTypeRepr(obj)));
      return SliceValue(obj, start, stop, step);
    }
    case ExprKind::kCall: {
      Value callee = Eval(*e.children[0], scope);
      CallArgs args = EvalArgs(e, 1, scope);
      return Call(callee, args);
    }
    case ExprKind::kFilter: {
      Value input = Eval(*e.children[0], scope);
      CallArgs args = EvalArgs(e, 1, scope);
      return CallFilter(e.name, input, args);
    }
    case ExprKind::kTest: {
      Value input = Eval(*e.children[0], scope);
      CallArgs args = EvalArgs(e, 1, scope);
      bool r = CallTest(e.name, input, args);
      return Value(e.negated ? !r : r);
    }
    case ExprKind::kUnary: {
      Value v = Eval(*e.children[0], scope);
      if (e.name == "not") return Value(!v.Truthy());
      return e.name == "-" ? Negate(v) : UnaryPlus(v);
    }
    case ExprKind::kBinary: {
      Value left = Eval(*e.children[0], scope);
      if (e.name == "and") return left.Truthy() ? Eval(*e.children[1], scope) : left;
      if (e.name == "or") return left.Truthy() ? left : Eval(*e.children[1], scope);
      return BinaryOp(e.name, left, Eval(*e.children[1], scope));
    }
    case ExprKind::kCompare: {
      Value left = Eval(*e.children[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = Eval(*e.children[i + 1], scope);
        if (!CompareOp(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondExpr:
      if (Eval(*e.children[0], scope).Truthy()) return Eval(*e.children[1], scope);
      if (e.children[2]) return Eval(*e.children[2], scope);
      return Value::Undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", e.pos.line));
    case ExprKind::kBlockInput:
      return Value(block_inputs_.back());
  }
  ThrowRuntime("unknown expression");
}

Value Evaluator::GetAttr(const Value& obj, const std::string& name) const {
  switch (obj.kind()) {
    case Kind::kUndefined:
      obj.RequireDefined();
      return obj;
    case Kind::kObject: {
      const Value* v = obj.object().Find(name);
      return v ? *v : NoAttribute(obj, name);
    }
    case Kind::kDict: {
      if (auto m = FindMethod(obj, name)) return *m;
      const Value* v = obj.dict().Find(name);
      return v ? *v : NoAttribute(obj, name);
    }
    default:
      if (auto m = FindMethod(obj, name)) return *m;
      return NoAttribute(obj, name);
  }
}

Value Evaluator::GetItem(const Value& obj, const Value& key) const {
  switch (obj.kind()) {
    case Kind::kUndefined:
      obj.RequireDefined();
      return obj;
    case Kind::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kString:
      if (key.is_integral()) {
        if (auto v = IndexSequence(obj, key.as_int())) return *v;
        return Value::Undefined(fmt::format("{} has no element {}", ObjectTypeRepr(obj), key.Repr()));
      }
      break;
    case Kind::kObject:
      if (key.is_string()) {
        if (const Value* v = obj.object().Find(key.str())) return *v;
      }
      break;
    default:
      break;
  }
  if (key.is_string()) {
    if (!obj.is_object()) {
      if (auto m = FindMethod(obj, key.str())) return *m;
    }
    return NoAttribute(obj, key.str());
  }
  return Value::Undefined(fmt::format("{} has no element {}", ObjectTypeRepr(obj), key.Repr()));
}

Value Evaluator::Call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.callable().fn(*this, args);
  callee.RequireDefined();
  ThrowRuntime(fmt::format("'{}' object is not callable", callee.TypeName()));
}

Value Evaluator::CallFilter(const std::string& name, const Value& input, CallArgs& args) {
  const FilterFn* f = FindFilter(name);
  if (f == nullptr) ThrowRuntime(fmt::format("No filter named '{}'.", name));
  return (*f)(*this, input, args);
}

bool Evaluator::CallTest(const std::string& name, const Value& input, CallArgs& args) {
  const TestFn* t = FindTest(name);
  if (t == nullptr) ThrowRuntime(fmt::format("No test named '{}'.", name));
  return (*t)(*this, input, args);
}

}  // namespace sparkserve::text::jinja
