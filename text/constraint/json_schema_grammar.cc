// JSON schema -> Grammar: one expression per schema node; objects, arrays, alternatives and $refs
// become rules (recursion, and bounded automaton sizes), scalars stay inline.
#include "text/constraint/json_schema_grammar.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "fmt/format.h"
#include "text/constraint/json_text.h"
#include "text/constraint/number_range.h"
#include "text/constraint/regex_parser.h"
#include "text/constraint/string_formats.h"

namespace sparkserve::text::constraint {
namespace {

using Json = nlohmann::ordered_json;

struct SchemaError {
  std::string message;
};

template <class... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> f, Args&&... args) {
  throw SchemaError{fmt::format(f, std::forward<Args>(args)...)};
}

std::string Quoted(const std::string& s) { return Json(s).dump(); }

const std::set<std::string>& UnsupportedKeywords() {
  static const std::set<std::string> k{"not",          "if",          "then",         "else",
                                       "patternProperties", "propertyNames", "dependentRequired",
                                       "dependentSchemas",  "dependencies",  "minProperties",
                                       "maxProperties",     "contains",      "minContains",
                                       "maxContains",       "multipleOf",    "$dynamicRef",
                                       "$recursiveRef"};
  return k;
}

std::optional<int64_t> IntField(const Json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer() || (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>())) {
    const int64_t v = it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
    if (v < 0) Fail("'{}' at {} must not be negative", key, path);
    return v;
  }
  Fail("'{}' at {} must be a non-negative integer", key, path);
}

// An expression's rough automaton size (repetitions counted up to 64 copies).
int64_t ExprSize(const ExprPtr& e) {
  int64_t n = 1;
  switch (e->kind) {
    case Expr::Kind::kLiteral: return static_cast<int64_t>(e->literal.size());
    case Expr::Kind::kCharSet: return 4;
    case Expr::Kind::kRepeat: return ExprSize(e->items[0]) * std::min<int64_t>(e->max < 0 ? e->min + 1 : e->max, 64);
    default:
      for (const ExprPtr& i : e->items) n += ExprSize(i);
      return n;
  }
}

class Converter {
 public:
  Converter(Grammar& g, const Json& root, std::string prefix) : g_(g), root_(root), prefix_(std::move(prefix)) {}

  ExprPtr Value(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) Fail("the schema at {} is false: no value can satisfy it", path);
      return AnyValue();
    }
    if (!s.is_object()) Fail("the schema at {} must be an object or a boolean", path);
    for (const auto& [key, value] : s.items()) {
      if (UnsupportedKeywords().count(key)) {
        Fail("the JSON schema keyword '{}' (at {}) is not supported for constrained output", key, path);
      }
      if (key == "uniqueItems" && value.is_boolean() && value.get<bool>()) {
        Fail("the JSON schema keyword 'uniqueItems' (at {}) is not supported for constrained output", path);
      }
      if ((key == "unevaluatedProperties" || key == "unevaluatedItems") && !(value.is_boolean() && !value.get<bool>())) {
        Fail("the JSON schema keyword '{}' (at {}) is only supported as false", key, path);
      }
    }
    const bool nullable = s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>();
    ExprPtr e = NonNullValue(s, path);
    return nullable ? Choice({e, Literal("null")}) : e;
  }

  ExprPtr AnyValue() {
    if (any_value_ < 0) {
      any_value_ = g_.AddUniqueRule(prefix_ + "value");
      const int32_t object = g_.AddUniqueRule(prefix_ + "object");
      const int32_t array = g_.AddUniqueRule(prefix_ + "array");
      const ExprPtr ws = JsonWhitespace(), sep = Seq({ws, Literal(","), ws});
      const ExprPtr value = RuleRef(any_value_);
      const ExprPtr string = Seq({Literal("\""), JsonStringChars(0, -1), Literal("\"")});
      const ExprPtr member = Seq({string, ws, Literal(":"), ws, value});
      g_.SetBody(object, Seq({Literal("{"), ws, Optional(Seq({member, Star(Seq({sep, member}))})), ws, Literal("}")}));
      g_.SetBody(array, Seq({Literal("["), ws, Optional(Seq({value, Star(Seq({sep, value}))})), ws, Literal("]")}));
      g_.SetBody(any_value_, Choice({RuleRef(object), RuleRef(array), string, AnyNumber(), Literal("true"),
                                     Literal("false"), Literal("null")}));
      any_object_ = object;
    }
    return RuleRef(any_value_);
  }

  ExprPtr AnyObject() {
    AnyValue();
    return RuleRef(any_object_);
  }

 private:
  ExprPtr NonNullValue(const Json& s, const std::string& path) {
    if (auto ref = s.find("$ref"); ref != s.end()) {
      if (!ref->is_string()) Fail("'$ref' at {} must be a string", path);
      return Ref(ref->get<std::string>(), path);
    }
    if (auto all = s.find("allOf"); all != s.end()) {
      if (!all->is_array() || all->size() != 1) {
        Fail("'allOf' (at {}) is only supported with a single schema", path);
      }
      return Value((*all)[0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto any = s.find(key); any != s.end()) {
        if (!any->is_array() || any->empty()) Fail("'{}' at {} must be a non-empty array of schemas", key, path);
        std::vector<ExprPtr> alts;
        for (size_t i = 0; i < any->size(); ++i) alts.push_back(Value((*any)[i], fmt::format("{}/{}/{}", path, key, i)));
        return Wrap(path, Choice(std::move(alts)));
      }
    }
    if (auto c = s.find("const"); c != s.end()) return Literal(c->dump());
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array()) Fail("'enum' at {} must be an array", path);
      if (e->empty()) Fail("'enum' at {} is empty: no value can satisfy it", path);
      std::vector<ExprPtr> alts;
      for (const Json& v : *e) alts.push_back(Literal(v.dump()));
      return Choice(std::move(alts));
    }
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const Json& x : *t) {
          if (!x.is_string()) Fail("'type' at {} must hold type names", path);
          types.push_back(x.get<std::string>());
        }
      } else {
        Fail("'type' at {} must be a type name or a non-empty array of them", path);
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return AnyValue();
    }
    std::vector<ExprPtr> alts;
    for (const std::string& type : types) alts.push_back(Typed(s, type, path));
    return Choice(std::move(alts));
  }

  ExprPtr Typed(const Json& s, const std::string& type, const std::string& path) {
    if (type == "null") return Literal("null");
    if (type == "boolean") return Choice({Literal("true"), Literal("false")});
    if (type == "integer") return Integer(s, path);
    if (type == "number") return Number(s, path);
    if (type == "string") return String(s, path);
    if (type == "object") return Object(s, path);
    if (type == "array") return Array(s, path);
    Fail("unknown type '{}' at {}", type, path);
  }

  // An expression as its own rule (named after the schema path).
  ExprPtr Wrap(const std::string& path, ExprPtr e) {
    std::string name = prefix_;
    for (char c : path) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    while (name.find("--") != std::string::npos) name.erase(name.find("--"), 1);
    if (name.empty() || name == "-") name = "node";
    const int32_t r = g_.AddUniqueRule(name);
    g_.SetBody(r, std::move(e));
    return RuleRef(r);
  }

  ExprPtr Ref(const std::string& ref, const std::string& path) {
    if (auto it = refs_.find(ref); it != refs_.end()) return RuleRef(it->second);
    if (ref.empty() || ref[0] != '#') Fail("'$ref' {} at {}: only references inside the schema (#...) are supported", ref, path);
    const Json* target = &root_;
    std::string pointer = ref.substr(1);
    if (!pointer.empty()) {
      try {
        target = &root_.at(Json::json_pointer(pointer));
      } catch (const std::exception&) {
        Fail("'$ref' {} at {} points to nothing in the schema", ref, path);
      }
    }
    std::string name = prefix_ + (pointer.empty() ? "root-ref" : pointer.substr(pointer.rfind('/') + 1));
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
    }
    const int32_t r = g_.AddUniqueRule(name);
    refs_[ref] = r;  // before converting: recursive references resolve to the rule
    g_.SetBody(r, Value(*target, ref));
    return RuleRef(r);
  }

  ExprPtr Integer(const Json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      auto it = s.find(key);
      if (it == s.end() || it->is_null() || it->is_boolean()) return;
      if (!it->is_number()) Fail("'{}' at {} must be a number", key, path);
      const double v = it->get<double>();
      if (std::fabs(v) > 1e17) {  // outside the digit limit: no bound in practice
        if ((lower && v > 0) || (!lower && v < 0)) Fail("'{}' at {} ({}) is beyond the integers this server writes", key, path, v);
        return;
      }
      int64_t b = 0;
      if (it->is_number_integer()) {
        b = it->get<int64_t>();
        if (exclusive) b += lower ? 1 : -1;
      } else {
        b = static_cast<int64_t>(lower ? (exclusive ? std::floor(v) + 1 : std::ceil(v)) : (exclusive ? std::ceil(v) - 1 : std::floor(v)));
      }
      auto& slot = lower ? lo : hi;
      slot = !slot ? b : lower ? std::max(*slot, b) : std::min(*slot, b);
    };
    const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
    const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
    bound("minimum", true, draft4_min);
    bound("maximum", false, draft4_max);
    bound("exclusiveMinimum", true, true);
    bound("exclusiveMaximum", false, true);
    if (!lo && !hi) return AnyInteger();
    absl::StatusOr<ExprPtr> e = IntegerRange(lo, hi);
    if (!e.ok()) Fail("the integer bounds at {} cannot be satisfied: {}", path, std::string(e.status().message()));
    return *e;
  }

  ExprPtr Number(const Json& s, const std::string& path) {
    std::optional<DecimalBound> lo, hi;
    auto tighter = [](std::optional<DecimalBound>& slot, DecimalBound b, bool lower) {
      if (!slot) {
        slot = b;
        return;
      }
      auto value = [](const DecimalBound& d) { return std::stod((d.negative ? "-" : "") + d.int_digits + "." + d.frac_digits + "0"); };
      const double a = value(*slot), c = value(b);
      if ((lower && c > a) || (!lower && c < a) || (c == a && b.exclusive)) slot = b;
    };
    const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"].get<bool>();
    const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"].get<bool>();
    for (auto [key, lower, exclusive] : {std::tuple{"minimum", true, draft4_min}, std::tuple{"maximum", false, draft4_max},
                                         std::tuple{"exclusiveMinimum", true, true}, std::tuple{"exclusiveMaximum", false, true}}) {
      auto it = s.find(key);
      if (it == s.end() || it->is_null() || it->is_boolean()) continue;
      if (!it->is_number()) Fail("'{}' at {} must be a number", key, path);
      tighter(lower ? lo : hi, DecimalFromDouble(it->get<double>(), exclusive), lower);
    }
    if (!lo && !hi) return AnyNumber();
    absl::StatusOr<ExprPtr> e = NumberRange(lo, hi);
    if (!e.ok()) Fail("the number bounds at {} cannot be satisfied: {}", path, std::string(e.status().message()));
    return *e;
  }

  ExprPtr String(const Json& s, const std::string& path) {
    const std::optional<int64_t> min = IntField(s, "minLength", path), max = IntField(s, "maxLength", path);
    if (min && max && *min > *max) Fail("minLength ({}) exceeds maxLength ({}) at {}", *min, *max, path);
    constexpr int64_t kMaxLength = 10000;
    if ((max && *max > kMaxLength) || (min && *min > kMaxLength)) {
      Fail("string lengths above {} (at {}) are not supported for constrained output", kMaxLength, path);
    }
    const bool lengths = min.has_value() || max.has_value();
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) Fail("'pattern' at {} must be a string", path);
      if (lengths) Fail("'pattern' together with minLength/maxLength (at {}) is not supported", path);
      absl::StatusOr<ExprPtr> re = ParseRegex(p->get<std::string>());
      if (!re.ok()) Fail("'pattern' at {}: {}", path, std::string(re.status().message()));
      return Seq({Literal("\""), JsonEscape(*re), Literal("\"")});
    }
    if (auto f = s.find("format"); f != s.end() && f->is_string()) {
      if (ExprPtr format = StringFormat(f->get<std::string>())) {
        if (lengths) Fail("'format' together with minLength/maxLength (at {}) is not supported", path);
        return Seq({Literal("\""), format, Literal("\"")});
      }
    }
    return Seq({Literal("\""), JsonStringChars(static_cast<int32_t>(min.value_or(0)), max ? static_cast<int32_t>(*max) : -1),
                Literal("\"")});
  }

  // A key (quoted) that is none of `names`: raw characters, so that it cannot spell a declared
  // name through escapes before it differs from all of them; escapes are fine after that.
  ExprPtr KeyNotIn(const std::vector<std::string>& names) {
    struct Node {
      std::map<uint32_t, Node> children;
      bool terminal = false;
    };
    Node root;
    for (const std::string& name : names) {
      Node* n = &root;
      for (size_t i = 0; i < name.size();) {  // by code point
        const auto c = static_cast<unsigned char>(name[i]);
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < len && i + k < name.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(name[i + k]) & 0x3F);
        n = &n->children[cp];
        i += len;
      }
      n->terminal = true;
    }
    std::function<ExprPtr(const Node&)> build = [&](const Node& n) -> ExprPtr {
      std::vector<ExprPtr> alts;
      if (!n.terminal) alts.push_back(Empty());
      std::vector<CodepointRange> taken;
      for (const auto& [cp, child] : n.children) {
        taken.push_back({cp, cp});
        if (cp >= 0x20 && cp != '"' && cp != '\\') {
          std::string s;
          AppendUtf8(cp, s);
          alts.push_back(Seq({Literal(s), build(child)}));
        }
      }
      std::vector<CodepointRange> other;
      const std::vector<CodepointRange> not_taken = NormalizeRanges(taken, /*negate=*/true);
      for (const CodepointRange& a : not_taken) {
        for (const CodepointRange& b : RawStringChars()) {
          if (std::max(a.lo, b.lo) <= std::min(a.hi, b.hi)) other.push_back({std::max(a.lo, b.lo), std::min(a.hi, b.hi)});
        }
      }
      if (!other.empty()) alts.push_back(Seq({CharSet(other), JsonStringChars(0, -1)}));
      return Choice(std::move(alts));
    };
    return Seq({Literal("\""), build(root), Literal("\"")});
  }

  ExprPtr Object(const Json& s, const std::string& path) {
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) Fail("'properties' at {} must be an object", path);
    std::vector<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) Fail("'required' at {} must be an array of names", path);
      for (const Json& n : *r) {
        if (!n.is_string()) Fail("'required' at {} must be an array of names", path);
        required.push_back(n.get<std::string>());
      }
    }
    // Extra keys: additionalProperties (default: none when properties are declared, any value when not).
    const Json* extra_schema = nullptr;
    bool extras = !s.contains("properties");
    if (auto a = s.find("additionalProperties"); a != s.end()) {
      if (a->is_boolean()) {
        extras = a->get<bool>();
      } else if (a->is_object()) {
        extras = true;
        extra_schema = &*a;
      } else {
        Fail("'additionalProperties' at {} must be a boolean or a schema", path);
      }
    } else if (s.contains("unevaluatedProperties")) {
      extras = false;
    }
    if (!s.contains("properties") && extras && !extra_schema && required.empty()) return AnyObject();

    struct Member {
      std::string name;
      const Json* schema;  // nullptr: any value (required but undeclared)
      bool required;
    };
    std::vector<Member> members;
    std::set<std::string> declared;
    for (const auto& [name, schema] : props.items()) {
      members.push_back({name, &schema, std::find(required.begin(), required.end(), name) != required.end()});
      declared.insert(name);
    }
    for (const std::string& name : required) {
      if (declared.count(name)) continue;
      if (!extras) {
        Fail("property '{}' is required at {} but additionalProperties forbids it: no object can satisfy the schema", name, path);
      }
      members.push_back({name, extra_schema, true});
      declared.insert(name);
    }
    const ExprPtr ws = JsonWhitespace(), sep = Seq({ws, Literal(","), ws});
    auto value_of = [&](const Json* schema, const std::string& at) { return schema ? Value(*schema, at) : AnyValue(); };
    std::vector<ExprPtr> kv;
    for (const Member& m : members) {
      kv.push_back(Seq({Literal(Quoted(m.name)), ws, Literal(":"), ws,
                        value_of(m.schema, fmt::format("{}/properties/{}", path, m.name))}));
    }
    ExprPtr extra_kv;
    if (extras) {
      std::vector<std::string> names(declared.begin(), declared.end());
      extra_kv = Seq({KeyNotIn(names), ws, Literal(":"), ws, value_of(extra_schema, path + "/additionalProperties")});
    }
    // S[i]: members i.. once something was written (each after a comma); F[i]: members i.. when
    // nothing was written yet. Optional members before the first required one make F branch; past a
    // few of them the chains become rules so that their size stays linear.
    const size_t n = members.size();
    size_t optional_prefix = 0;
    while (optional_prefix < n && !members[optional_prefix].required) ++optional_prefix;
    const bool as_rules = optional_prefix > 8;
    auto maybe_rule = [&](ExprPtr e) { return as_rules ? Wrap(path + "/members", std::move(e)) : e; };
    std::vector<ExprPtr> S(n + 1), F(n + 1);
    S[n] = extras ? Star(Seq({sep, extra_kv})) : Empty();
    F[n] = extras ? Optional(Seq({extra_kv, S[n]})) : Empty();
    for (size_t i = n; i-- > 0;) {
      const ExprPtr item = Seq({sep, kv[i]});
      S[i] = maybe_rule(Seq({members[i].required ? item : Optional(item), S[i + 1]}));
      F[i] = members[i].required ? Seq({kv[i], S[i + 1]}) : maybe_rule(Choice({Seq({kv[i], S[i + 1]}), F[i + 1]}));
    }
    return Wrap(path, Seq({Literal("{"), ws, F[0], ws, Literal("}")}));
  }

  ExprPtr Array(const Json& s, const std::string& path) {
    std::vector<ExprPtr> prefix;
    const Json* items = nullptr;  // extra items' schema; nullptr with `no_extras`: none allowed
    bool no_extras = false;
    if (auto p = s.find("prefixItems"); p != s.end()) {
      if (!p->is_array()) Fail("'prefixItems' at {} must be an array of schemas", path);
      for (size_t i = 0; i < p->size(); ++i) prefix.push_back(Value((*p)[i], fmt::format("{}/prefixItems/{}", path, i)));
    }
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) {  // draft 4 tuples: items + additionalItems
        for (size_t i = 0; i < it->size(); ++i) prefix.push_back(Value((*it)[i], fmt::format("{}/items/{}", path, i)));
        if (auto a = s.find("additionalItems"); a != s.end()) {
          if (a->is_boolean() && !a->get<bool>()) no_extras = true;
          if (a->is_object()) items = &*a;
        }
      } else if (it->is_boolean()) {
        no_extras = !it->get<bool>();
      } else {
        items = &*it;
      }
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    const int64_t min_items = IntField(s, "minItems", path).value_or(0);
    std::optional<int64_t> max_items = IntField(s, "maxItems", path);
    if (max_items && min_items > *max_items) Fail("minItems ({}) exceeds maxItems ({}) at {}", min_items, *max_items, path);
    if (no_extras) max_items = std::min(max_items.value_or(k), k);
    if (min_items > max_items.value_or(min_items)) {
      Fail("minItems ({}) at {} asks for more items than the schema allows", min_items, path);
    }
    constexpr int64_t kMaxItems = 10000;
    if (min_items > kMaxItems || max_items.value_or(0) > kMaxItems) {
      Fail("array lengths above {} (at {}) are not supported for constrained output", kMaxItems, path);
    }
    ExprPtr extra;
    if (!no_extras) {
      extra = items ? Value(*items, path + "/items") : AnyValue();
      const int64_t copies = max_items ? *max_items - k : min_items + 1;
      if (copies > 1 && ExprSize(extra) * copies > 4000) extra = Wrap(path + "/items", extra);
    }
    const ExprPtr ws = JsonWhitespace(), sep = Seq({ws, Literal(","), ws});
    const int64_t max_total = max_items.value_or(-1);
    // Tail(i): items i.. once i items are written (each after a comma).
    std::function<ExprPtr(int64_t)> tail = [&](int64_t i) -> ExprPtr {
      if (max_total >= 0 && i >= max_total) return Empty();
      if (i < k) {
        ExprPtr e = Seq({sep, prefix[static_cast<size_t>(i)], tail(i + 1)});
        return i < min_items ? e : Optional(e);
      }
      if (!extra) return Empty();
      const int64_t lo = std::max<int64_t>(0, min_items - i);
      const int64_t hi = max_total < 0 ? -1 : max_total - i;
      return Repeat(Seq({sep, extra}), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    };
    ExprPtr body;
    if (max_total == 0 || (k == 0 && !extra)) {
      body = Empty();
    } else {
      ExprPtr first = Seq({k > 0 ? prefix[0] : extra, tail(1)});
      body = min_items >= 1 ? first : Optional(first);
    }
    return Wrap(path, Seq({Literal("["), ws, body, ws, Literal("]")}));
  }

  Grammar& g_;
  const Json& root_;
  std::string prefix_;
  std::map<std::string, int32_t> refs_;
  int32_t any_value_ = -1;
  int32_t any_object_ = -1;
};

}  // namespace

absl::StatusOr<ExprPtr> AddJsonSchema(Grammar& g, const nlohmann::ordered_json& schema, std::string_view prefix,
                                      const nlohmann::ordered_json* root) {
  try {
    Converter c(g, root ? *root : schema, std::string(prefix));
    return c.Value(schema, "#");
  } catch (const SchemaError& e) {
    return absl::InvalidArgumentError(e.message);
  }
}

absl::StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  absl::StatusOr<ExprPtr> value = AddJsonSchema(g, schema, "");
  if (!value.ok()) return value.status();
  g.SetBody(root, *value);
  g.set_root(root);
  return g;
}

Grammar JsonObjectGrammar() {
  Grammar g;
  const int32_t root = g.AddRule("root");
  Converter c(g, nlohmann::ordered_json::object(), "");
  g.SetBody(root, c.AnyObject());
  g.set_root(root);
  return g;
}

}  // namespace sparkserve::text::constraint
