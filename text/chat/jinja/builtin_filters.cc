// jinja2's builtin filters, plus Hugging Face's `tojson` (json.dumps: key order kept, no ASCII or
// HTML escaping, ", " / ": " separators, indent/separators/sort_keys/ensure_ascii arguments).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "fmt/format.h"
#include "text/chat/jinja/call_args.h"
#include "text/chat/jinja/evaluator.h"
#include "text/chat/jinja/json_value.h"
#include "text/chat/jinja/operators.h"
#include "text/chat/jinja/python_format.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {
namespace {

// ---- helpers shared by several filters ----

Value IgnoreCase(const Value& v) { return v.is_string() ? Value(PyLower(v.str())) : v; }

// jinja2's make_attrgetter: "a.b.0" walks items (dict keys, list indices, then attributes).
Value GetAttributePath(Evaluator& ev, Value item, const Value& attribute) {
  if (attribute.is_integral()) return ev.GetItem(item, attribute);
  for (const std::string& part : PySplit(attribute.Str(), std::string("."), -1)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    item = ev.GetItem(item, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return item;
}

struct KeyGetter {
  Evaluator& ev;
  Value attribute;  // undefined/None: the item itself
  bool ignore_case;
  Value operator()(const Value& item) const {
    Value v = (attribute.is_undefined() || attribute.is_none()) ? item : GetAttributePath(ev, item, attribute);
    return ignore_case ? IgnoreCase(v) : v;
  }
};

ValueList SortedBy(ValueList items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : items) keyed.emplace_back(key(x), std::move(x));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? PyLess(b.first, a.first) : PyLess(a.first, b.first);
  });
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::optional<int64_t> ParsePyInt(std::string s, int base) {
  s = PyStrip(s, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  bool neg = false;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') {
    neg = s[0] == '-';
    i = 1;
  }
  if (base == 16 && s.size() > i + 1 && s[i] == '0' && (s[i + 1] | 0x20) == 'x') i += 2;
  if (base == 8 && s.size() > i + 1 && s[i] == '0' && (s[i + 1] | 0x20) == 'o') i += 2;
  if (base == 2 && s.size() > i + 1 && s[i] == '0' && (s[i + 1] | 0x20) == 'b') i += 2;
  std::string digits;
  for (size_t k = i; k < s.size(); ++k) {
    char c = s[k];
    if (c == '_' && k > i && k + 1 < s.size() && s[k + 1] != '_') continue;
    int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    digits += c;
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  int64_t v = std::strtoll(digits.c_str(), nullptr, base);
  if (errno == ERANGE) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> ParsePyFloat(const std::string& raw) {
  std::string s = PyStrip(raw, std::nullopt, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
      continue;
    }
    clean += s[k];
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = PyLower(clean);
  std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity") return lower[0] == '-' ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  for (char c : body) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != 'e' && c != '+' && c != '-') return std::nullopt;
  }
  char* end = nullptr;
  double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

double PyRound(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    std::string s = fmt::format("{:.{}f}", x, ndigits);
    return std::strtod(s.c_str(), nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

// ---- filters ----

Value Abs(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("abs", args, {});
  if (v.is_integral()) return Value(static_cast<int64_t>(std::llabs(v.as_int())));
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  v.RequireDefined();
  ThrowRuntime(fmt::format("bad operand type for abs(): '{}'", v.TypeName()));
}

Value Attr(Evaluator& ev, const Value& v, CallArgs& args) {
  BoundArgs a("attr", args, {"name"});
  std::string name = a.need(0, "attr", "name").Str();
  if (v.is_object()) return ev.GetAttr(v, name);
  if (v.is_dict() || v.is_string() || v.is_sequence()) {
    if (auto m = FindMethod(v, name)) return *m;
  }
  v.RequireDefined();
  return Value::Undefined(fmt::format("'{} object' has no attribute '{}'", v.TypeName(), name));
}

Value Batch(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"});
  const Value& n = a.need(0, "batch", "linecount");
  if (!n.is_integral() || n.as_int() <= 0) ThrowRuntime("batch linecount must be a positive integer");
  const size_t count = static_cast<size_t>(n.as_int());
  ValueList out, tmp;
  for (const Value& x : Iterate(v)) {
    if (tmp.size() == count) {
      out.push_back(Value::List(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(x);
  }
  if (!tmp.empty()) {
    if (a.has(1) && !a.get(1).is_none()) {
      while (tmp.size() < count) tmp.push_back(a.get(1));
    }
    out.push_back(Value::List(std::move(tmp)));
  }
  return Value::List(std::move(out));
}

Value Capitalize(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("capitalize", args, {});
  return Value(PyCapitalize(v.Str()));
}

Value Center(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  int64_t width = a.get_or(0, Value(80)).as_int();
  std::string s = v.Str();
  int64_t len = static_cast<int64_t>(CodepointCount(s));
  if (width <= len) return Value(s);
  int64_t total = width - len, left = total / 2 + (total & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
}

Value Default(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  bool boolean = a.get(1).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return a.get_or(0, Value(""));
  return v;
}

Value DictSort(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) {
    v.RequireDefined();
    ThrowRuntime(fmt::format("'{}' object has no attribute 'items'", v.TypeName()));
  }
  bool case_sensitive = a.get(0).Truthy();
  std::string by = a.get_or(1, Value("key")).Str();
  size_t pos = by == "key" ? 0 : by == "value" ? 1 : 2;
  if (pos == 2) ThrowRuntime("You can only sort by either \"key\" or \"value\"");
  ValueList pairs;
  for (const auto& [k, val] : v.dict().entries) pairs.push_back(Value::Tuple({k, val}));
  return Value::List(SortedBy(std::move(pairs), [&](const Value& p) {
    const Value& x = p.items()[pos];
    return case_sensitive ? x : IgnoreCase(x);
  }, a.get(2).Truthy()));
}

Value Escape(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("escape", args, {});
  return Value(HtmlEscape(v.Str()));
}

Value First(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("first", args, {});
  ValueList xs = Iterate(v);
  return xs.empty() ? Value::Undefined("No first item, sequence was empty.") : xs.front();
}

Value Last(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("last", args, {});
  ValueList xs = Iterate(v);
  return xs.empty() ? Value::Undefined("No last item, sequence was empty.") : xs.back();
}

Value Float(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto f = ParsePyFloat(v.str())) return Value(*f);
  }
  return a.get_or(0, Value(0.0));
}

Value Format(Evaluator&, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    ThrowRuntime("can't handle positional and keyword arguments at the same time");
  }
  if (!args.keyword.empty()) {
    auto d = std::make_shared<DictData>();
    for (auto& [k, x] : args.keyword) d->Set(Value(k), x);
    return Value(PercentFormat(v.Str(), Value::Dict(d)));
  }
  return Value(PercentFormat(v.Str(), Value::Tuple(args.positional)));
}

Value Indent(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  Value width = a.get_or(0, Value(4));
  std::string indention = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::string s = v.Str() + "\n";
  std::vector<std::string> lines = PySplitlines(s, false);
  std::string rv;
  if (a.get(2).Truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention + lines[i]);
  }
  if (a.get(1).Truthy()) rv = indention + rv;
  return Value(std::move(rv));
}

Value Int(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value(0));
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) ThrowRuntime("cannot convert float infinity or NaN to integer");
    return Value(static_cast<int64_t>(std::trunc(v.as_double())));
  }
  if (v.is_string()) {
    if (auto i = ParsePyInt(v.str(), static_cast<int>(a.get_or(1, Value(10)).as_int()))) return Value(*i);
    if (auto f = ParsePyFloat(v.str()); f && std::isfinite(*f)) return Value(static_cast<int64_t>(std::trunc(*f)));
  }
  return fallback;
}

Value Items(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("items", args, {});
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict()) ThrowRuntime("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::Tuple({k, x}));
  return Value::List(std::move(out));
}

Value Join(Evaluator& ev, const Value& v, CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  std::string sep = a.get_or(0, Value("")).Str();
  std::string out;
  bool first = true;
  for (const Value& x : Iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (a.has(1) && !a.get(1).is_none()) ? GetAttributePath(ev, x, a.get(1)).Str() : x.Str();
  }
  return Value(std::move(out));
}

Value LengthFilter(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("length", args, {});
  return Value(Length(v));
}

Value ToList(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("list", args, {});
  return Value::List(Iterate(v));
}

Value Lower(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("lower", args, {});
  return Value(PyLower(v.Str()));
}

Value Upper(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("upper", args, {});
  return Value(PyUpper(v.Str()));
}

Value Map(Evaluator& ev, const Value& v, CallArgs& args) {
  ValueList out;
  if (args.positional.empty()) {
    Value attribute, fallback = Value::None();
    for (auto& [k, x] : args.keyword) {
      if (k == "attribute") attribute = x;
      else if (k == "default") fallback = x;
      else ThrowRuntime(fmt::format("Unexpected keyword argument '{}'", k));
    }
    if (attribute.is_undefined()) ThrowRuntime("map requires a filter argument");
    for (const Value& x : Iterate(v)) {
      Value r = GetAttributePath(ev, x, attribute);
      out.push_back(r.is_undefined() && !fallback.is_none() ? fallback : r);
    }
    return Value::List(std::move(out));
  }
  std::string name = args.positional[0].Str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& x : Iterate(v)) {
    CallArgs copy = rest;
    out.push_back(ev.CallFilter(name, x, copy));
  }
  return Value::List(std::move(out));
}

Value MinMax(Evaluator& ev, const Value& v, CallArgs& args, bool max) {
  BoundArgs a(max ? "max" : "min", args, {"case_sensitive", "attribute"});
  KeyGetter key{ev, a.get(1), !a.get(0).Truthy()};
  ValueList xs = Iterate(v);
  if (xs.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(xs[0]);
  for (size_t i = 1; i < xs.size(); ++i) {
    Value k = key(xs[i]);
    if (max ? PyLess(best_key, k) : PyLess(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return xs[best];
}

Value SelectOrReject(Evaluator& ev, const Value& v, CallArgs& args, bool select, bool by_attr) {
  const char* fn = by_attr ? (select ? "selectattr" : "rejectattr") : (select ? "select" : "reject");
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (args.positional.empty()) ThrowRuntime(fmt::format("{}() missing required argument 'attribute'", fn));
    attribute = args.positional[next++];
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    test = args.positional[next++].Str();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    test_args.keyword = args.keyword;
  }
  ValueList out;
  for (const Value& x : Iterate(v)) {
    Value probe = by_attr ? GetAttributePath(ev, x, attribute) : x;
    bool ok;
    if (test) {
      CallArgs copy = test_args;
      ok = ev.CallTest(*test, probe, copy);
    } else {
      ok = probe.Truthy();
    }
    if (ok == select) out.push_back(x);
  }
  return Value::List(std::move(out));
}

Value Replace(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"});
  int64_t count = (a.get(2).is_undefined() || a.get(2).is_none()) ? -1 : a.get(2).as_int();
  return Value(PyReplace(v.Str(), a.need(0, "replace", "old").Str(), a.need(1, "replace", "new").Str(), count));
}

Value Reverse(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("reverse", args, {});
  if (v.is_string()) {
    std::u32string u = DecodeUtf8(v.str());
    std::reverse(u.begin(), u.end());
    return Value(EncodeUtf8(u));
  }
  ValueList xs = Iterate(v);
  std::reverse(xs.begin(), xs.end());
  return Value::List(std::move(xs));
}

Value Round(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  int64_t precision = a.get_or(0, Value(0)).as_int();
  std::string method = a.get_or(1, Value("common")).Str();
  if (method != "common" && method != "ceil" && method != "floor") ThrowRuntime("method must be common, ceil or floor");
  if (!v.is_number()) {
    v.RequireDefined();
    ThrowRuntime(fmt::format("type {} doesn't define __round__ method", v.TypeName()));
  }
  if (method == "common") {
    if (v.is_integral()) return Value(v.as_int());
    return Value(PyRound(v.as_double(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value Safe(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("safe", args, {});
  return Value(v.Str());
}

Value Sort(Evaluator& ev, const Value& v, CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  KeyGetter key{ev, a.get(2), !a.get(1).Truthy()};
  return Value::List(SortedBy(Iterate(v), key, a.get(0).Truthy()));
}

Value String(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("string", args, {});
  return Value(v.Str());
}

Value Sum(Evaluator& ev, const Value& v, CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value(0));
  for (const Value& x : Iterate(v)) {
    total = BinaryOp("+", total, (a.has(0) && !a.get(0).is_none()) ? GetAttributePath(ev, x, a.get(0)) : x);
  }
  return total;
}

Value Title(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("title", args, {});
  // jinja2: split on runs of [-\s({\[<] and capitalise each piece.
  std::u32string u = DecodeUtf8(v.Str());
  auto is_sep = [](char32_t c) { return IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    std::string piece = EncodeUtf8(std::u32string_view(u).substr(i, j - i));
    if (sep) {
      out += piece;
    } else {
      std::u32string p = std::u32string(u.substr(i, j - i));
      std::string head, rest;
      AppendUtf8(head, p[0]);
      out += PyUpper(head) + PyLower(EncodeUtf8(std::u32string_view(p).substr(1)));
    }
    i = j;
  }
  return Value(std::move(out));
}

Value ToJson(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.get(0).Truthy();
  const Value& indent = a.get(1);
  if (indent.is_string()) {
    o.indent = indent.str();
  } else if (indent.is_integral()) {
    o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  } else if (!indent.is_none() && !indent.is_undefined()) {
    ThrowRuntime(fmt::format("indent must be an int or a str, not {}", indent.TypeName()));
  }
  if (o.indent) o.item_separator = ",";
  const Value& seps = a.get(2);
  if (seps.is_sequence()) {
    if (seps.items().size() != 2) ThrowRuntime("separators must be a pair (item_separator, key_separator)");
    o.item_separator = seps.items()[0].Str();
    o.key_separator = seps.items()[1].Str();
  } else if (!seps.is_none() && !seps.is_undefined()) {
    ThrowRuntime("separators must be a pair (item_separator, key_separator)");
  }
  o.sort_keys = a.get(3).Truthy();
  return Value(JsonDumps(v, o));
}

Value Trim(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (a.get(0).is_string()) chars = a.get(0).str();
  return Value(PyStrip(v.Str(), chars, true, true));
}

Value Unique(Evaluator& ev, const Value& v, CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  KeyGetter key{ev, a.get(1), !a.get(0).Truthy()};
  ValueList seen, out;
  for (const Value& x : Iterate(v)) {
    Value k = key(x);
    if (k.is_list() || k.is_dict()) ThrowRuntime(fmt::format("unhashable type: '{}'", k.TypeName()));
    bool dup = false;
    for (const Value& s : seen) dup = dup || PyEquals(s, k);
    if (dup) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::List(std::move(out));
}

Value WordCount(Evaluator&, const Value& v, CallArgs& args) {
  BoundArgs("wordcount", args, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(v.Str())) {
    bool w = IsPyWordChar(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

}  // namespace

const FilterFn* FindFilter(const std::string& name) {
  static const auto* filters = new std::unordered_map<std::string, FilterFn>{
      {"abs", Abs},
      {"attr", Attr},
      {"batch", Batch},
      {"capitalize", Capitalize},
      {"center", Center},
      {"count", LengthFilter},
      {"d", Default},
      {"default", Default},
      {"dictsort", DictSort},
      {"e", Escape},
      {"escape", Escape},
      {"first", First},
      {"float", Float},
      {"forceescape", Escape},
      {"format", Format},
      {"indent", Indent},
      {"int", Int},
      {"items", Items},
      {"join", Join},
      {"last", Last},
      {"length", LengthFilter},
      {"list", ToList},
      {"lower", Lower},
      {"map", Map},
      {"max", [](Evaluator& ev, const Value& v, CallArgs& a) { return MinMax(ev, v, a, true); }},
      {"min", [](Evaluator& ev, const Value& v, CallArgs& a) { return MinMax(ev, v, a, false); }},
      {"reject", [](Evaluator& ev, const Value& v, CallArgs& a) { return SelectOrReject(ev, v, a, false, false); }},
      {"rejectattr", [](Evaluator& ev, const Value& v, CallArgs& a) { return SelectOrReject(ev, v, a, false, true); }},
      {"replace", Replace},
      {"reverse", Reverse},
      {"round", Round},
      {"safe", Safe},
      {"select", [](Evaluator& ev, const Value& v, CallArgs& a) { return SelectOrReject(ev, v, a, true, false); }},
      {"selectattr", [](Evaluator& ev, const Value& v, CallArgs& a) { return SelectOrReject(ev, v, a, true, true); }},
      {"sort", Sort},
      {"string", String},
      {"sum", Sum},
      {"title", Title},
      {"tojson", ToJson},
      {"trim", Trim},
      {"unique", Unique},
      {"upper", Upper},
      {"wordcount", WordCount},
  };
  auto it = filters->find(name);
  return it == filters->end() ? nullptr : &it->second;
}

}  // namespace sparkserve::text::jinja
