// jinja2's builtin tests (`x is string`, `x is divisibleby 3`, ...), with jinja2's answers for
// undefined values (an undefined is iterable, a sequence and callable, like jinja2's Undefined).
#include <unordered_map>

#include "fmt/format.h"
#include "text/chat/jinja/call_args.h"
#include "text/chat/jinja/evaluator.h"
#include "text/chat/jinja/operators.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {
namespace {

const Value& Arg(const char* test, CallArgs& args) {
  if (args.positional.empty()) ThrowRuntime(fmt::format("test '{}' needs an argument", test));
  return args.positional[0];
}

bool Compare(const char* op, const char* test, const Value& v, CallArgs& args) {
  return CompareOp(op, v, Arg(test, args));
}

bool IsOdd(Evaluator&, const Value& v, CallArgs&) {
  return BinaryOp("%", v, Value(2)).Truthy();
}

}  // namespace

const TestFn* FindTest(const std::string& name) {
  static const auto* tests = new std::unordered_map<std::string, TestFn>{
      {"defined", [](Evaluator&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Evaluator&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Evaluator&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](Evaluator&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](Evaluator&, const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](Evaluator&, const Value& v, CallArgs&) { return v.is_float(); }},
      {"number", [](Evaluator&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Evaluator&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Evaluator&, const Value& v, CallArgs&) { return v.is_dict(); }},
      {"sequence", [](Evaluator&, const Value& v, CallArgs&) {
         return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
       }},
      {"iterable", [](Evaluator&, const Value& v, CallArgs&) {
         return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
       }},
      {"callable", [](Evaluator&, const Value& v, CallArgs&) { return v.is_callable() || v.is_undefined(); }},
      {"lower", [](Evaluator&, const Value& v, CallArgs&) {
         std::string s = v.Str();
         bool cased = false;
         for (char32_t c : DecodeUtf8(s)) cased = cased || IsPyCased(c);
         return cased && PyLower(s) == s;
       }},
      {"upper", [](Evaluator&, const Value& v, CallArgs&) {
         std::string s = v.Str();
         bool cased = false;
         for (char32_t c : DecodeUtf8(s)) cased = cased || IsPyCased(c);
         return cased && PyUpper(s) == s;
       }},
      {"odd", IsOdd},
      {"even", [](Evaluator& ev, const Value& v, CallArgs& a) { return !IsOdd(ev, v, a); }},
      {"divisibleby", [](Evaluator&, const Value& v, CallArgs& a) {
         return PyEquals(BinaryOp("%", v, Arg("divisibleby", a)), Value(0));
       }},
      {"sameas", [](Evaluator&, const Value& v, CallArgs& a) {
         const Value& other = Arg("sameas", a);
         if (v.kind() != other.kind()) return false;
         if (v.is_none() || v.is_bool() || v.is_int() || v.is_string()) return PyEquals(v, other);
         return PyEquals(v, other) && (v.is_object() || v.is_callable());
       }},
      {"in", [](Evaluator&, const Value& v, CallArgs& a) { return Contains(Arg("in", a), v); }},
      {"eq", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("==", "eq", v, a); }},
      {"equalto", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("==", "equalto", v, a); }},
      {"==", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("==", "==", v, a); }},
      {"ne", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("!=", "ne", v, a); }},
      {"!=", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("!=", "!=", v, a); }},
      {"lt", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("<", "lt", v, a); }},
      {"lessthan", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("<", "lessthan", v, a); }},
      {"<", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("<", "<", v, a); }},
      {"le", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("<=", "le", v, a); }},
      {"<=", [](Evaluator&, const Value& v, CallArgs& a) { return Compare("<=", "<=", v, a); }},
      {"gt", [](Evaluator&, const Value& v, CallArgs& a) { return Compare(">", "gt", v, a); }},
      {"greaterthan", [](Evaluator&, const Value& v, CallArgs& a) { return Compare(">", "greaterthan", v, a); }},
      {">", [](Evaluator&, const Value& v, CallArgs& a) { return Compare(">", ">", v, a); }},
      {"ge", [](Evaluator&, const Value& v, CallArgs& a) { return Compare(">=", "ge", v, a); }},
      {">=", [](Evaluator&, const Value& v, CallArgs& a) { return Compare(">=", ">=", v, a); }},
      {"escaped", [](Evaluator&, const Value&, CallArgs&) { return false; }},
      {"filter", [](Evaluator&, const Value& v, CallArgs&) { return v.is_string() && FindFilter(v.str()) != nullptr; }},
      {"test", [](Evaluator&, const Value& v, CallArgs&) { return v.is_string() && FindTest(v.str()) != nullptr; }},
  };
  auto it = tests->find(name);
  return it == tests->end() ? nullptr : &it->second;
}

}  // namespace sparkserve::text::jinja
