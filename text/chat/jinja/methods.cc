// Python methods reachable from templates: str methods, and the read-only dict/list methods the
// immutable sandbox allows (mutating ones resolve to an undefined that fails when called).
#include <unordered_map>

#include "fmt/format.h"
#include "text/chat/jinja/call_args.h"
#include "text/chat/jinja/evaluator.h"
#include "text/chat/jinja/operators.h"
#include "text/chat/jinja/python_format.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {
namespace {

using MethodFn = Value (*)(const Value& self, CallArgs& args);

std::optional<std::string> OptString(const Value& v, std::string_view fn) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) ThrowRuntime(fmt::format("{}() argument must be str or None, not {}", fn, v.TypeName()));
  return v.str();
}

const std::string& NeedString(const Value& v, std::string_view fn) {
  if (!v.is_string()) {
    v.RequireDefined();
    ThrowRuntime(fmt::format("{}() argument must be str, not {}", fn, v.TypeName()));
  }
  return v.str();
}

int64_t OptInt(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_integral()) ThrowRuntime(fmt::format("'{}' object cannot be interpreted as an integer", v.TypeName()));
  return v.as_int();
}

// startswith/endswith: a prefix or a tuple of prefixes, optional start/end.
Value AffixTest(const Value& self, CallArgs& args, bool suffix) {
  const char* fn = suffix ? "endswith" : "startswith";
  BoundArgs a(fn, args, {"prefix", "start", "end"});
  std::string s = self.str();
  if (a.has(1) || a.has(2)) {
    Value sliced = SliceValue(self, a.get_or(1, Value::None()), a.get_or(2, Value::None()), Value::None());
    s = sliced.str();
  }
  const Value& p = a.need(0, fn, "prefix");
  ValueList options = p.is_tuple() ? p.items() : ValueList{p};
  for (const Value& o : options) {
    if (!o.is_string()) ThrowRuntime(fmt::format("{} first arg must be str or a tuple of str, not {}", fn, o.TypeName()));
    const std::string& x = o.str();
    if (x.size() <= s.size() && (suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0)) {
      return Value(true);
    }
  }
  return Value(false);
}

Value StringList(std::vector<std::string> parts) {
  ValueList out;
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::List(std::move(out));
}

Value Strip(const Value& self, CallArgs& args, bool left, bool right, const char* fn) {
  BoundArgs a(fn, args, {"chars"});
  return Value(PyStrip(self.str(), OptString(a.get(0), fn), left, right));
}

Value Split(const Value& self, CallArgs& args, bool reverse) {
  const char* fn = reverse ? "rsplit" : "split";
  BoundArgs a(fn, args, {"sep", "maxsplit"});
  auto sep = OptString(a.get(0), fn);
  int64_t maxsplit = OptInt(a.get(1), -1);
  return StringList(reverse ? PyRSplit(self.str(), sep, maxsplit) : PySplit(self.str(), sep, maxsplit));
}

template <bool (*Pred)(char32_t)>
Value AllChars(const Value& self) {
  std::u32string u = DecodeUtf8(self.str());
  if (u.empty()) return Value(false);
  for (char32_t c : u) {
    if (!Pred(c)) return Value(false);
  }
  return Value(true);
}

bool IsDigitChar(char32_t c) { return c >= '0' && c <= '9'; }
bool IsAlphaChar(char32_t c) { return IsPyWordChar(c) && c != '_' && !IsDigitChar(c); }
bool IsAlnumChar(char32_t c) { return IsPyWordChar(c) && c != '_'; }

Value Pad(const Value& self, CallArgs& args, const char* fn, int mode) {
  BoundArgs a(fn, args, {"width", "fillchar"});
  int64_t width = OptInt(a.need(0, fn, "width"), 0);
  std::string fill = a.has(1) ? NeedString(a.get(1), fn) : " ";
  int64_t len = static_cast<int64_t>(CodepointCount(self.str()));
  if (width <= len) return self;
  int64_t total = width - len, left = 0;
  if (mode == 0) left = total / 2 + (total & width & 1);  // Python's center
  if (mode == 2) left = total;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += self.str();
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}

const std::unordered_map<std::string, MethodFn>& StringMethods() {
  static const auto* methods = new std::unordered_map<std::string, MethodFn>{
      {"startswith", [](const Value& s, CallArgs& a) { return AffixTest(s, a, false); }},
      {"endswith", [](const Value& s, CallArgs& a) { return AffixTest(s, a, true); }},
      {"split", [](const Value& s, CallArgs& a) { return Split(s, a, false); }},
      {"rsplit", [](const Value& s, CallArgs& a) { return Split(s, a, true); }},
      {"splitlines", [](const Value& s, CallArgs& a) {
         BoundArgs b("splitlines", a, {"keepends"});
         return StringList(PySplitlines(s.str(), b.get(0).Truthy()));
       }},
      {"strip", [](const Value& s, CallArgs& a) { return Strip(s, a, true, true, "strip"); }},
      {"lstrip", [](const Value& s, CallArgs& a) { return Strip(s, a, true, false, "lstrip"); }},
      {"rstrip", [](const Value& s, CallArgs& a) { return Strip(s, a, false, true, "rstrip"); }},
      {"upper", [](const Value& s, CallArgs& a) { BoundArgs("upper", a, {}); return Value(PyUpper(s.str())); }},
      {"lower", [](const Value& s, CallArgs& a) { BoundArgs("lower", a, {}); return Value(PyLower(s.str())); }},
      {"casefold", [](const Value& s, CallArgs& a) { BoundArgs("casefold", a, {}); return Value(PyLower(s.str())); }},
      {"title", [](const Value& s, CallArgs& a) { BoundArgs("title", a, {}); return Value(PyTitle(s.str())); }},
      {"capitalize", [](const Value& s, CallArgs& a) { BoundArgs("capitalize", a, {}); return Value(PyCapitalize(s.str())); }},
      {"swapcase", [](const Value& s, CallArgs& a) { BoundArgs("swapcase", a, {}); return Value(PySwapcase(s.str())); }},
      {"replace", [](const Value& s, CallArgs& a) {
         BoundArgs b("replace", a, {"old", "new", "count"});
         return Value(PyReplace(s.str(), NeedString(b.need(0, "replace", "old"), "replace"),
                                NeedString(b.need(1, "replace", "new"), "replace"), OptInt(b.get(2), -1)));
       }},
      {"find", [](const Value& s, CallArgs& a) {
         BoundArgs b("find", a, {"sub"});
         return Value(PyFind(s.str(), NeedString(b.need(0, "find", "sub"), "find"), false));
       }},
      {"rfind", [](const Value& s, CallArgs& a) {
         BoundArgs b("rfind", a, {"sub"});
         return Value(PyFind(s.str(), NeedString(b.need(0, "rfind", "sub"), "rfind"), true));
       }},
      {"index", [](const Value& s, CallArgs& a) {
         BoundArgs b("index", a, {"sub"});
         int64_t i = PyFind(s.str(), NeedString(b.need(0, "index", "sub"), "index"), false);
         if (i < 0) ThrowRuntime("substring not found");
         return Value(i);
       }},
      {"rindex", [](const Value& s, CallArgs& a) {
         BoundArgs b("rindex", a, {"sub"});
         int64_t i = PyFind(s.str(), NeedString(b.need(0, "rindex", "sub"), "rindex"), true);
         if (i < 0) ThrowRuntime("substring not found");
         return Value(i);
       }},
      {"count", [](const Value& s, CallArgs& a) {
         BoundArgs b("count", a, {"sub"});
         return Value(PyCount(s.str(), NeedString(b.need(0, "count", "sub"), "count")));
       }},
      {"join", [](const Value& s, CallArgs& a) {
         BoundArgs b("join", a, {"iterable"});
         std::string out;
         bool first = true;
         for (const Value& x : Iterate(b.need(0, "join", "iterable"))) {
           if (!x.is_string()) ThrowRuntime(fmt::format("sequence item: expected str instance, {} found", x.TypeName()));
           if (!first) out += s.str();
           first = false;
           out += x.str();
         }
         return Value(std::move(out));
       }},
      {"format", [](const Value& s, CallArgs& a) { return Value(BraceFormat(s.str(), a)); }},
      {"isdigit", [](const Value& s, CallArgs&) { return AllChars<IsDigitChar>(s); }},
      {"isdecimal", [](const Value& s, CallArgs&) { return AllChars<IsDigitChar>(s); }},
      {"isnumeric", [](const Value& s, CallArgs&) { return AllChars<IsDigitChar>(s); }},
      {"isalpha", [](const Value& s, CallArgs&) { return AllChars<IsAlphaChar>(s); }},
      {"isalnum", [](const Value& s, CallArgs&) { return AllChars<IsAlnumChar>(s); }},
      {"isspace", [](const Value& s, CallArgs&) { return AllChars<IsPySpace>(s); }},
      {"islower", [](const Value& s, CallArgs&) {
         bool cased = false;
         for (char32_t c : DecodeUtf8(s.str())) {
           if (!IsPyCased(c)) continue;
           cased = true;
           std::string one;
           AppendUtf8(one, c);
           if (PyLower(one) != one) return Value(false);
         }
         return Value(cased);
       }},
      {"isupper", [](const Value& s, CallArgs&) {
         bool cased = false;
         for (char32_t c : DecodeUtf8(s.str())) {
           if (!IsPyCased(c)) continue;
           cased = true;
           std::string one;
           AppendUtf8(one, c);
           if (PyUpper(one) != one) return Value(false);
         }
         return Value(cased);
       }},
      {"zfill", [](const Value& s, CallArgs& a) {
         BoundArgs b("zfill", a, {"width"});
         int64_t width = OptInt(b.need(0, "zfill", "width"), 0);
         std::string str = s.str();
         int64_t len = static_cast<int64_t>(CodepointCount(str));
         if (width <= len) return s;
         size_t sign = (!str.empty() && (str[0] == '-' || str[0] == '+')) ? 1 : 0;
         return Value(str.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') + str.substr(sign));
       }},
      {"center", [](const Value& s, CallArgs& a) { return Pad(s, a, "center", 0); }},
      {"ljust", [](const Value& s, CallArgs& a) { return Pad(s, a, "ljust", 1); }},
      {"rjust", [](const Value& s, CallArgs& a) { return Pad(s, a, "rjust", 2); }},
      {"removeprefix", [](const Value& s, CallArgs& a) {
         BoundArgs b("removeprefix", a, {"prefix"});
         const std::string& p = NeedString(b.need(0, "removeprefix", "prefix"), "removeprefix");
         return s.str().compare(0, p.size(), p) == 0 ? Value(s.str().substr(p.size())) : s;
       }},
      {"removesuffix", [](const Value& s, CallArgs& a) {
         BoundArgs b("removesuffix", a, {"suffix"});
         const std::string& p = NeedString(b.need(0, "removesuffix", "suffix"), "removesuffix");
         const std::string& str = s.str();
         bool has = !p.empty() && p.size() <= str.size() && str.compare(str.size() - p.size(), p.size(), p) == 0;
         return has ? Value(str.substr(0, str.size() - p.size())) : s;
       }},
      {"partition", [](const Value& s, CallArgs& a) {
         BoundArgs b("partition", a, {"sep"});
         const std::string& sep = NeedString(b.need(0, "partition", "sep"), "partition");
         size_t at = s.str().find(sep);
         if (at == std::string::npos) return Value::Tuple({s, Value(""), Value("")});
         return Value::Tuple({Value(s.str().substr(0, at)), Value(sep), Value(s.str().substr(at + sep.size()))});
       }},
      {"rpartition", [](const Value& s, CallArgs& a) {
         BoundArgs b("rpartition", a, {"sep"});
         const std::string& sep = NeedString(b.need(0, "rpartition", "sep"), "rpartition");
         size_t at = s.str().rfind(sep);
         if (at == std::string::npos) return Value::Tuple({Value(""), Value(""), s});
         return Value::Tuple({Value(s.str().substr(0, at)), Value(sep), Value(s.str().substr(at + sep.size()))});
       }},
  };
  return *methods;
}

const std::unordered_map<std::string, MethodFn>& DictMethods() {
  static const auto* methods = new std::unordered_map<std::string, MethodFn>{
      {"items", [](const Value& d, CallArgs& a) {
         BoundArgs("items", a, {});
         ValueList out;
         for (const auto& [k, v] : d.dict().entries) out.push_back(Value::Tuple({k, v}));
         return Value::List(std::move(out));
       }},
      {"keys", [](const Value& d, CallArgs& a) {
         BoundArgs("keys", a, {});
         return Value::List(Iterate(d));
       }},
      {"values", [](const Value& d, CallArgs& a) {
         BoundArgs("values", a, {});
         ValueList out;
         for (const auto& e : d.dict().entries) out.push_back(e.second);
         return Value::List(std::move(out));
       }},
      {"get", [](const Value& d, CallArgs& a) {
         BoundArgs b("get", a, {"key", "default"});
         const Value* v = d.dict().Find(b.need(0, "get", "key"));
         return v ? *v : b.get_or(1, Value::None());
       }},
      {"copy", [](const Value& d, CallArgs& a) {
         BoundArgs("copy", a, {});
         return Value::Dict(std::make_shared<DictData>(d.dict()));
       }},
  };
  return *methods;
}

const std::unordered_map<std::string, MethodFn>& ListMethods() {
  static const auto* methods = new std::unordered_map<std::string, MethodFn>{
      {"index", [](const Value& l, CallArgs& a) {
         BoundArgs b("index", a, {"value"});
         const auto& xs = l.items();
         for (size_t i = 0; i < xs.size(); ++i) {
           if (PyEquals(xs[i], b.need(0, "index", "value"))) return Value(static_cast<int64_t>(i));
         }
         ThrowRuntime(fmt::format("{} is not in list", b.get(0).Repr()));
       }},
      {"count", [](const Value& l, CallArgs& a) {
         BoundArgs b("count", a, {"value"});
         int64_t n = 0;
         for (const Value& x : l.items()) n += PyEquals(x, b.need(0, "count", "value"));
         return Value(n);
       }},
      {"copy", [](const Value& l, CallArgs& a) {
         BoundArgs("copy", a, {});
         return Value::List(l.items());
       }},
  };
  return *methods;
}

bool IsMutatingMethod(Kind kind, const std::string& name) {
  static const char* kList[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  static const char* kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (kind == Kind::kList) {
    for (const char* m : kList) if (name == m) return true;
  }
  if (kind == Kind::kDict) {
    for (const char* m : kDict) if (name == m) return true;
  }
  return false;
}

}  // namespace

std::optional<Value> FindMethod(const Value& obj, const std::string& name) {
  const std::unordered_map<std::string, MethodFn>* table = nullptr;
  if (obj.is_string()) table = &StringMethods();
  else if (obj.is_dict()) table = &DictMethods();
  else if (obj.is_sequence()) table = &ListMethods();
  if (table == nullptr) return std::nullopt;
  auto it = table->find(name);
  if (it == table->end()) {
    if (IsMutatingMethod(obj.kind(), name)) {
      return Value::Undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.TypeName()));
    }
    return std::nullopt;
  }
  MethodFn fn = it->second;
  Value self = obj;
  return Value::Function(name, [fn, self](Evaluator&, CallArgs& args) { return fn(self, args); });
}

}  // namespace sparkserve::text::jinja
