// Global functions every template sees: jinja2's range/dict/namespace/joiner/cycler and Hugging
// Face's raise_exception (an error the caller reports as a bad request) and strftime_now.
#include <ctime>

#include "fmt/format.h"
#include "text/chat/jinja/call_args.h"
#include "text/chat/jinja/evaluator.h"

namespace sparkserve::text::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox MAX_RANGE

int64_t IntArg(const Value& v) {
  if (!v.is_integral()) ThrowRuntime(fmt::format("'{}' object cannot be interpreted as an integer", v.TypeName()));
  return v.as_int();
}

Value Range(Evaluator&, CallArgs& args) {
  if (!args.keyword.empty()) ThrowRuntime("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) ThrowRuntime(fmt::format("range expected at most 3 arguments, got {}", p.size()));
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = IntArg(p[0]);
  } else {
    start = IntArg(p[0]);
    stop = IntArg(p[1]);
    if (p.size() == 3) step = IntArg(p[2]);
  }
  if (step == 0) ThrowRuntime("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) {
      ThrowRuntime("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.emplace_back(i);
  }
  return Value::List(std::move(out));
}

Value MakeDict(Evaluator&, CallArgs& args) {
  auto d = std::make_shared<DictData>();
  if (args.positional.size() > 1) ThrowRuntime("dict expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      *d = src.dict();
    } else if (src.is_sequence()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_sequence() || pair.items().size() != 2) ThrowRuntime("dictionary update sequence element has wrong length");
        d->Set(pair.items()[0], pair.items()[1]);
      }
    } else {
      ThrowRuntime(fmt::format("'{}' object is not iterable", src.TypeName()));
    }
  }
  for (auto& [k, v] : args.keyword) d->Set(Value(k), v);
  return Value::Dict(d);
}

Value MakeNamespace(Evaluator& ev, CallArgs& args) {
  Value init = MakeDict(ev, args);
  auto ns = std::make_shared<ObjectData>();
  ns->type_name = "Namespace";
  ns->assignable = true;
  for (const auto& [k, v] : init.dict().entries) {
    if (!k.is_string()) ThrowRuntime("namespace keywords must be strings");
    ns->attrs.emplace_back(k.str(), v);
  }
  return Value::Object(ns);
}

Value MakeJoiner(Evaluator&, CallArgs& args) {
  BoundArgs a("joiner", args, {"sep"});
  std::string sep = a.get_or(0, Value(", ")).Str();
  auto used = std::make_shared<bool>(false);
  return Value::Function("joiner", [sep, used](Evaluator&, CallArgs&) -> Value {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  });
}

Value MakeCycler(Evaluator&, CallArgs& args) {
  if (args.positional.empty()) ThrowRuntime("at least one item has to be provided");
  auto items = std::make_shared<ValueList>(args.positional);
  auto pos = std::make_shared<size_t>(0);
  auto obj = std::make_shared<ObjectData>();
  obj->type_name = "Cycler";
  obj->attrs = {
      {"next", Value::Function("next", [items, pos](Evaluator&, CallArgs&) -> Value {
         Value v = (*items)[*pos];
         *pos = (*pos + 1) % items->size();
         return v;
       })},
      {"reset", Value::Function("reset", [pos](Evaluator&, CallArgs&) -> Value {
         *pos = 0;
         return Value::None();
       })},
      {"current", (*items)[0]},
  };
  return Value::Object(obj);
}

Value RaiseException(Evaluator&, CallArgs& args) {
  BoundArgs a("raise_exception", args, {"message"});
  throw TemplateError(ErrorKind::kRaised, a.need(0, "raise_exception", "message").Str());
}

Value StrftimeNow(Evaluator&, CallArgs& args) {
  BoundArgs a("strftime_now", args, {"format"});
  const Value& f = a.need(0, "strftime_now", "format");
  if (!f.is_string()) ThrowRuntime("strftime() argument 1 must be str");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  size_t n = f.str().empty() ? 0 : std::strftime(buf, sizeof(buf), f.str().c_str(), &local);
  return Value(std::string(buf, n));
}

}  // namespace

void AddBuiltinGlobals(Scope& scope) {
  scope.Set("range", Value::Function("range", Range));
  scope.Set("dict", Value::Function("dict", MakeDict));
  scope.Set("namespace", Value::Function("namespace", MakeNamespace));
  scope.Set("joiner", Value::Function("joiner", MakeJoiner));
  scope.Set("cycler", Value::Function("cycler", MakeCycler));
  scope.Set("raise_exception", Value::Function("raise_exception", RaiseException));
  scope.Set("strftime_now", Value::Function("strftime_now", StrftimeNow));
}

}  // namespace sparkserve::text::jinja
