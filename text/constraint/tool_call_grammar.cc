// Forced tool calls: call markup around per-function argument grammars.
#include "text/constraint/tool_call_grammar.h"

#include <algorithm>

#include "fmt/format.h"
#include "text/constraint/json_schema_grammar.h"
#include "text/constraint/regex_parser.h"
#include "text/constraint/string_formats.h"

namespace sparkserve::text::constraint {
namespace {

using Json = nlohmann::ordered_json;

// Text of an XML parameter value that is a string: anything but '<' (so that it cannot close or
// open markup).
ExprPtr RawTextChars(int32_t min, int32_t max) { return Repeat(CharSet({{'<', '<'}}, /*negate=*/true), min, max); }

absl::StatusOr<int32_t> LengthField(const Json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end()) return -1;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000) {
    return absl::InvalidArgumentError(fmt::format("'{}' must be an integer in [0, 10000]", key));
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

// A string parameter's text in the XML form.
absl::StatusOr<ExprPtr> XmlStringValue(const Json& s) {
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
    std::vector<ExprPtr> alts;
    for (const Json& v : *e) {
      if (!v.is_string()) return absl::InvalidArgumentError("a string parameter's enum must hold strings");
      alts.push_back(Literal(v.get<std::string>()));
    }
    if (alts.empty()) return absl::InvalidArgumentError("an empty enum cannot be satisfied");
    return Choice(std::move(alts));
  }
  if (auto c = s.find("const"); c != s.end() && c->is_string()) return Literal(c->get<std::string>());
  if (auto p = s.find("pattern"); p != s.end() && p->is_string()) return ParseRegex(p->get<std::string>());
  if (auto f = s.find("format"); f != s.end() && f->is_string()) {
    if (ExprPtr e = StringFormat(f->get<std::string>())) return e;
  }
  absl::StatusOr<int32_t> min = LengthField(s, "minLength"), max = LengthField(s, "maxLength");
  if (!min.ok()) return min.status();
  if (!max.ok()) return max.status();
  if (*max >= 0 && std::max(*min, 0) > *max) return absl::InvalidArgumentError("minLength exceeds maxLength");
  return RawTextChars(std::max(*min, 0), *max);
}

// One parameter's value in the XML form: string text, or JSON text of its schema.
absl::StatusOr<ExprPtr> XmlValue(Grammar& g, const Json& schema, const Json& root, const std::string& prefix) {
  const Json* s = &schema;
  // Follow a local $ref to decide the kind of value (JSON values resolve their own refs).
  if (s->is_object() && s->contains("$ref") && (*s)["$ref"].is_string()) {
    const std::string ref = (*s)["$ref"].get<std::string>();
    if (ref.size() > 1 && ref[0] == '#') {
      try {
        s = &root.at(Json::json_pointer(ref.substr(1)));
      } catch (const std::exception&) {
        return absl::InvalidArgumentError(fmt::format("'$ref' {} points to nothing in the schema", ref));
      }
    }
  }
  std::vector<std::string> types;
  if (s->is_object()) {
    if (auto t = s->find("type"); t != s->end()) {
      if (t->is_string()) types.push_back(t->get<std::string>());
      if (t->is_array()) {
        for (const Json& x : *t) {
          if (x.is_string()) types.push_back(x.get<std::string>());
        }
      }
    }
  }
  const bool is_string = types == std::vector<std::string>{"string"};
  const bool nullable_string = types.size() == 2 && std::count(types.begin(), types.end(), "string") == 1 &&
                               std::count(types.begin(), types.end(), "null") == 1;
  const bool string_enum = types.empty() && s->is_object() && s->contains("enum") && (*s)["enum"].is_array() &&
                           std::all_of((*s)["enum"].begin(), (*s)["enum"].end(), [](const Json& v) { return v.is_string(); });
  if (is_string || nullable_string || string_enum) {
    absl::StatusOr<ExprPtr> text = XmlStringValue(*s);
    if (!text.ok()) return text.status();
    return nullable_string ? Choice({*text, Literal("null")}) : *text;
  }
  if (types.empty()) {
    return absl::InvalidArgumentError(
        "the XML tool-call format writes parameters as text, so each needs a 'type' (or a string enum)");
  }
  for (const std::string& t : types) {
    if (t == "string") {
      return absl::InvalidArgumentError("a parameter that may be a string or another type cannot be told apart in the XML "
                                        "tool-call format");
    }
  }
  return AddJsonSchema(g, *s, prefix, &root);
}

// The parameters of one function in the XML form, in the schema's order.
absl::StatusOr<ExprPtr> XmlParameters(Grammar& g, const Json& schema, const std::string& prefix) {
  if (schema.is_null() || !schema.is_object() || !schema.contains("properties")) return Empty();
  const Json& props = schema["properties"];
  if (!props.is_object()) return absl::InvalidArgumentError("'properties' must be an object");
  std::vector<std::string> required;
  if (auto r = schema.find("required"); r != schema.end() && r->is_array()) {
    for (const Json& n : *r) {
      if (n.is_string()) required.push_back(n.get<std::string>());
    }
  }
  for (const std::string& name : required) {
    if (!props.contains(name)) {
      return absl::InvalidArgumentError(fmt::format("required parameter '{}' is not among the properties", name));
    }
  }
  std::vector<ExprPtr> items;
  for (const auto& [name, prop] : props.items()) {
    if (name.find_first_of("<>\n") != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("parameter name '{}' cannot be written in the XML call format", name));
    }
    absl::StatusOr<ExprPtr> value = XmlValue(g, prop, schema, fmt::format("{}{}-", prefix, name));
    if (!value.ok()) {
      return absl::InvalidArgumentError(fmt::format("parameter '{}': {}", name, std::string(value.status().message())));
    }
    ExprPtr kv = Seq({Literal(fmt::format("<parameter={}>\n", name)), *value, Literal("\n</parameter>\n")});
    const bool req = std::find(required.begin(), required.end(), name) != required.end();
    items.push_back(req ? kv : Optional(kv));
  }
  return Seq(std::move(items));
}

// Any parameters (a non-strict tool whose schema does not convert).
ExprPtr LooseXmlParameters() {
  return Star(Seq({Literal("<parameter="), Repeat(CharSet({{'<', '<'}, {'>', '>'}, {'\n', '\n'}}, true), 1, 64),
                   Literal(">\n"), RawTextChars(0, -1), Literal("\n</parameter>\n")}));
}

absl::StatusOr<ExprPtr> JsonArguments(Grammar& g, const Json& schema, const std::string& prefix) {
  if (schema.is_null()) return Literal("{}");
  return AddJsonSchema(g, schema, prefix);
}

// Per function: the part of a call after "<tool_call>\n" up to its close. Strict tools must
// convert; others fall back to free-form arguments.
absl::StatusOr<ExprPtr> CallBodies(Grammar& g, ToolCallFormat format, const std::vector<ToolSpec>& tools) {
  const bool xml = format == ToolCallFormat::kQwenXml;
  std::vector<ExprPtr> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& t = tools[i];
    const std::string prefix = fmt::format("tool{}-", i);
    absl::StatusOr<ExprPtr> args = xml ? XmlParameters(g, t.parameters, prefix) : JsonArguments(g, t.parameters, prefix);
    if (!args.ok()) {
      if (t.strict) {
        return absl::InvalidArgumentError(fmt::format("tool '{}' (strict): {}", t.name, std::string(args.status().message())));
      }
      args = xml ? LooseXmlParameters() : AddJsonSchema(g, Json{{"type", "object"}}, prefix + "any-");
      if (!args.ok()) return args.status();
    }
    calls.push_back(xml ? Seq({Literal(fmt::format("<function={}>\n", t.name)), *args})
                        : Seq({Literal(fmt::format("{{\"name\": {}, \"arguments\": ", Json(t.name).dump())), *args}));
  }
  if (calls.empty()) return absl::InvalidArgumentError("no tools to call");
  return Seq({Choice(std::move(calls)), Literal(xml ? "</function>\n</tool_call>" : "}\n</tool_call>")});
}

}  // namespace

ExprPtr TextWithout(Grammar& g, std::string_view marker, std::string_view prefix) {
  const size_t m = marker.size();
  std::vector<size_t> failure(m, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && marker[i] != marker[k]) k = failure[k - 1];
    if (marker[i] == marker[k]) ++k;
    failure[i] = k;
  }
  auto next = [&](size_t k, char c) {  // matched prefix length after reading c
    while (k > 0 && marker[k] != c) k = failure[k - 1];
    return marker[k] == c ? k + 1 : 0;
  };
  std::vector<int32_t> rules(m);
  for (size_t k = 0; k < m; ++k) rules[k] = g.AddUniqueRule(fmt::format("{}text-{}", prefix, k));
  std::vector<CodepointRange> marker_chars;
  for (unsigned char c : marker) marker_chars.push_back({c, c});
  for (size_t k = 0; k < m; ++k) {
    std::vector<ExprPtr> alts{Empty()};
    std::vector<bool> done(256, false);
    for (unsigned char c : marker) {
      if (done[c]) continue;
      done[c] = true;
      const size_t to = next(k, static_cast<char>(c));
      if (to < m) alts.push_back(Seq({Literal(std::string(1, static_cast<char>(c))), RuleRef(rules[to])}));
    }
    alts.push_back(Seq({CharSet(marker_chars, /*negate=*/true), RuleRef(rules[0])}));
    g.SetBody(rules[k], Choice(std::move(alts)));
  }
  return RuleRef(rules[0]);
}

absl::StatusOr<Grammar> AutoToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  absl::StatusOr<ExprPtr> call = CallBodies(g, format, tools);
  if (!call.ok()) return call.status();
  const int32_t call_rule = g.AddRule("call");
  g.SetBody(call_rule, *call);
  const ExprPtr text = TextWithout(g, "<tool_call>", "");
  g.SetBody(root, Seq({text, Star(Seq({Literal("<tool_call>\n"), RuleRef(call_rule), text}))}));
  g.set_root(root);
  return g;
}

absl::StatusOr<Grammar> ForcedToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                              const std::optional<std::string>& named, bool parallel_calls) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  // Per function: its arguments (the part after the function is named).
  std::vector<std::pair<std::string, ExprPtr>> bodies;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSpec& t = tools[i];
    if (named && t.name != *named) continue;
    const std::string prefix = fmt::format("tool{}-", i);
    absl::StatusOr<ExprPtr> args = format == ToolCallFormat::kQwenXml ? XmlParameters(g, t.parameters, prefix)
                                                                      : JsonArguments(g, t.parameters, prefix);
    if (!args.ok()) {
      if (t.strict) {
        return absl::InvalidArgumentError(
            fmt::format("tool '{}' (strict): {}", t.name, std::string(args.status().message())));
      }
      args = format == ToolCallFormat::kQwenXml ? LooseXmlParameters()
                                                : AddJsonSchema(g, Json{{"type", "object"}}, prefix + "any-");
      if (!args.ok()) return args.status();
    }
    bodies.emplace_back(t.name, *args);
  }
  if (bodies.empty()) {
    return absl::InvalidArgumentError(named ? fmt::format("no tool is named '{}'", *named) : std::string("no tools to call"));
  }
  const bool xml = format == ToolCallFormat::kQwenXml;
  const ExprPtr close = Literal(xml ? "</function>\n</tool_call>" : "}\n</tool_call>");
  // A whole call after "<tool_call>\n": the function chosen, then its arguments.
  std::vector<ExprPtr> calls;
  for (const auto& [name, args] : bodies) {
    calls.push_back(xml ? Seq({Literal(fmt::format("<function={}>\n", name)), args})
                        : Seq({Literal(fmt::format("{{\"name\": {}, \"arguments\": ", Json(name).dump())), args}));
  }
  const int32_t call = g.AddRule("call");
  g.SetBody(call, Seq({Choice(std::move(calls)), close}));
  // A named choice is exactly one call; `required` may make several.
  const ExprPtr more = parallel_calls && !named ? Star(Seq({Literal("\n<tool_call>\n"), RuleRef(call)})) : Empty();
  if (named) {
    g.SetBody(root, Seq({bodies[0].second, close, more}));
  } else {
    g.SetBody(root, Seq({RuleRef(call), more}));
  }
  g.set_root(root);
  return g;
}

}  // namespace sparkserve::text::constraint
