// Structured-output request fields -> grammar -> compiled (cached) -> the engine's constraint.
#include "head/http/structured_output.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/grammar_constraint.h"
#include "fmt/format.h"
#include "head/http/api_error.h"
#include "text/constraint/gbnf_parser.h"
#include "text/constraint/grammar_compiler.h"
#include "text/constraint/json_schema_grammar.h"
#include "text/constraint/regex_parser.h"
#include "text/constraint/tool_call_grammar.h"

namespace sparkserve::head::http {
namespace {

namespace tc = text::constraint;

// White space allowed between a reasoning block's end and the constrained output ("\n\n").
constexpr int32_t kWhitespaceAfterReasoning = 4;

// The most bytes of source (a schema as JSON text, a regex, a grammar, the choices, the tools'
// schemas) one constraint may have: parsing builds an expression node per byte or so, so a 32 MiB
// body must not become gigabytes of grammar. The automaton has its own state limits after that.
constexpr size_t kMaxConstraintSourceBytes = 256u << 10;

void CheckSourceBytes(size_t bytes, const std::string& field) {
  if (bytes > kMaxConstraintSourceBytes) {
    throw RequestError(400, fmt::format("{}: {} bytes, more than the {} bytes a constraint may have", field, bytes,
                                        kMaxConstraintSourceBytes), field);
  }
}

struct Wanted {
  std::string field;  // the request field it came from (error messages, the 400's param)
  tc::Grammar grammar;
  std::string description;
};

tc::Grammar Or400(absl::StatusOr<tc::Grammar> g, const std::string& field) {
  if (!g.ok()) throw RequestError(400, fmt::format("{}: {}", field, std::string(g.status().message())), field);
  return std::move(*g);
}

// A schema given as an object (or boolean), or as JSON text (vLLM accepts both for guided_json).
Json SchemaOf(const Json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) {
    CheckSourceBytes(DumpJson(v).size(), field);
    return v;
  }
  if (v.is_string()) {
    CheckSourceBytes(v.get_ref<const std::string&>().size(), field);
    return ParseJsonField(v.get<std::string>(), field + ": the schema", field.c_str());
  }
  throw RequestError(400, fmt::format("{}: must be a JSON schema (an object)", field), field);
}

std::string StringOf(const Json& v, const std::string& field) {
  if (!v.is_string()) throw RequestError(400, fmt::format("{}: must be a string", field), field);
  CheckSourceBytes(v.get_ref<const std::string&>().size(), field);
  return v.get<std::string>();
}

std::vector<std::string> ChoicesOf(const Json& v, const std::string& field) {
  if (!v.is_array()) throw RequestError(400, fmt::format("{}: must be an array of strings", field), field);
  std::vector<std::string> out;
  size_t bytes = 0;
  for (const Json& c : v) {
    if (!c.is_string()) throw RequestError(400, fmt::format("{}: must be an array of strings", field), field);
    out.push_back(c.get<std::string>());
    bytes += out.back().size() + 1;
  }
  CheckSourceBytes(bytes, field);
  return out;
}

Wanted JsonSchemaWanted(const Json& schema, const std::string& field) {
  return {field, Or400(tc::JsonSchemaGrammar(schema), field), "json_schema"};
}

std::optional<Wanted> ResponseFormat(const Json& rf) {
  const std::string field = "response_format";
  if (!rf.is_object()) throw RequestError(400, "response_format: must be an object with a 'type'", field);
  const std::string type = rf.contains("type") && rf["type"].is_string() ? rf["type"].get<std::string>() : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return Wanted{field, tc::JsonObjectGrammar(), "json_object"};
  if (type == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object()) {
      throw RequestError(400, "response_format: type json_schema needs a 'json_schema' object", field);
    }
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null()) {
      throw RequestError(400, "response_format: json_schema needs a 'schema'", field);
    }
    return JsonSchemaWanted(SchemaOf(*schema, field), field);
  }
  throw RequestError(400, fmt::format("response_format: unknown type '{}' (text, json_object or json_schema)", type), field);
}

std::optional<Wanted> StructuredOutputs(const Json& so) {
  const std::string field = "structured_outputs";
  if (!so.is_object()) throw RequestError(400, "structured_outputs: must be an object", field);
  std::optional<Wanted> out;
  for (const auto& [key, value] : so.items()) {
    if (value.is_null() || key == "backend" || key == "disable_fallback" || key == "disable_any_whitespace" ||
        key == "disable_additional_properties") {
      continue;
    }
    std::optional<Wanted> w;
    const std::string at = "structured_outputs." + key;
    if (key == "json") {
      w = JsonSchemaWanted(SchemaOf(value, at), at);
    } else if (key == "regex") {
      w = Wanted{at, Or400(tc::RegexGrammar(StringOf(value, at)), at), "regex"};
    } else if (key == "choice") {
      w = Wanted{at, Or400(tc::ChoiceGrammar(ChoicesOf(value, at)), at), "choice"};
    } else if (key == "grammar") {
      w = Wanted{at, Or400(tc::ParseGbnf(StringOf(value, at)), at), "grammar"};
    } else if (key == "json_object") {
      if (!value.is_boolean()) throw RequestError(400, "structured_outputs.json_object: must be a boolean", at);
      if (!value.get<bool>()) continue;
      w = Wanted{at, tc::JsonObjectGrammar(), "json_object"};
    } else {
      throw RequestError(400, fmt::format("structured_outputs: '{}' is not supported (json, regex, choice, grammar, "
                                          "json_object)", key), at);
    }
    if (out) throw RequestError(400, "structured_outputs: give only one of json, regex, choice, grammar, json_object", field);
    out = std::move(w);
  }
  return out;
}

std::shared_ptr<const scheduler::OutputConstraint> Compile(const ServingContext& ctx, Wanted w, bool starts_in_reasoning) {
  if (!ctx.grammars) {
    throw RequestError(400, fmt::format("{}: structured outputs are not available on this server", w.field), w.field);
  }
  const bool gated = starts_in_reasoning && !ctx.reasoning_end.empty();
  tc::Grammar g = gated ? tc::WithLeadingWhitespace(std::move(w.grammar), kWhitespaceAfterReasoning) : std::move(w.grammar);
  absl::StatusOr<std::shared_ptr<const tc::CompiledGrammar>> compiled = ctx.grammars->Compile(g);
  if (!compiled.ok()) {
    throw RequestError(400, fmt::format("{}: {}", w.field, std::string(compiled.status().message())), w.field);
  }
  return std::make_shared<engine::GrammarConstraint>(*compiled, gated ? ctx.reasoning_end : "", w.description);
}

std::vector<tc::ToolSpec> ToolSpecs(const Json& tools) {
  std::vector<tc::ToolSpec> specs;
  for (const Json& t : tools) {
    const Json& fn = t["function"];
    tc::ToolSpec s;
    s.name = fn["name"].get<std::string>();
    if (auto p = fn.find("parameters"); p != fn.end()) s.parameters = *p;
    if (auto st = fn.find("strict"); st != fn.end() && st->is_boolean()) s.strict = st->get<bool>();
    specs.push_back(std::move(s));
  }
  return specs;
}

tc::ToolCallFormat FormatOf(const ServingContext& ctx) {
  return ctx.tool_call_markup == ToolCallMarkup::kQwenXml ? tc::ToolCallFormat::kQwenXml : tc::ToolCallFormat::kQwenJson;
}

}  // namespace

std::shared_ptr<const scheduler::OutputConstraint> ReadOutputConstraint(const ServingContext& ctx, const Json& body,
                                                                        bool starts_in_reasoning) {
  std::vector<Wanted> wanted;
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null() ? &*it : nullptr;
  };
  if (const Json* rf = present("response_format")) {
    if (auto w = ResponseFormat(*rf)) wanted.push_back(std::move(*w));
  }
  if (const Json* v = present("guided_json")) wanted.push_back(JsonSchemaWanted(SchemaOf(*v, "guided_json"), "guided_json"));
  if (const Json* v = present("guided_regex")) {
    wanted.push_back({"guided_regex", Or400(tc::RegexGrammar(StringOf(*v, "guided_regex")), "guided_regex"), "regex"});
  }
  if (const Json* v = present("guided_choice")) {
    wanted.push_back({"guided_choice", Or400(tc::ChoiceGrammar(ChoicesOf(*v, "guided_choice")), "guided_choice"), "choice"});
  }
  if (const Json* v = present("guided_grammar")) {
    wanted.push_back({"guided_grammar", Or400(tc::ParseGbnf(StringOf(*v, "guided_grammar")), "guided_grammar"), "grammar"});
  }
  if (const Json* v = present("structured_outputs")) {
    if (auto w = StructuredOutputs(*v)) wanted.push_back(std::move(*w));
  }
  if (const Json* v = present("grammar")) {
    wanted.push_back({"grammar", Or400(tc::ParseGbnf(StringOf(*v, "grammar")), "grammar"), "grammar"});
  }
  if (const Json* v = present("json_schema")) wanted.push_back(JsonSchemaWanted(SchemaOf(*v, "json_schema"), "json_schema"));
  if (present("guided_whitespace_pattern")) {
    throw RequestError(400, "guided_whitespace_pattern is not supported (JSON output allows one space, or a newline "
                            "and indentation, between tokens)", "guided_whitespace_pattern");
  }
  if (wanted.empty()) return nullptr;
  if (wanted.size() > 1) {
    throw RequestError(400, fmt::format("only one field may constrain the output; got {} and {}", wanted[0].field,
                                        wanted[1].field), wanted[1].field);
  }
  return Compile(ctx, std::move(wanted[0]), starts_in_reasoning);
}

std::shared_ptr<const scheduler::OutputConstraint> ForcedToolCallConstraint(const ServingContext& ctx, const Json& tools,
                                                                            const ToolChoice& choice,
                                                                            bool parallel_tool_calls) {
  if (!choice.forced() || tools.is_null() || ctx.tool_call_markup == ToolCallMarkup::kNone) return nullptr;
  // Without a grammar compiler (a server or test with no vocabulary for it) a forced call is only
  // started in the prompt, as before structured outputs; asking for a format is a 400 there.
  if (!ctx.grammars) return nullptr;
  CheckSourceBytes(DumpJson(tools).size(), "tools");
  const std::vector<tc::ToolSpec> specs = ToolSpecs(tools);
  std::optional<std::string> named;
  if (choice.mode == ToolChoice::Mode::kNamed) named = choice.name;
  Wanted w{"tools", Or400(tc::ForcedToolCallGrammar(FormatOf(ctx), specs, named, parallel_tool_calls), "tools"), "tool_call"};
  return Compile(ctx, std::move(w), /*starts_in_reasoning=*/false);
}

std::shared_ptr<const scheduler::OutputConstraint> ChatOutputConstraint(const ServingContext& ctx, const Json& body,
                                                                        const Json& tools, const ToolChoice& choice,
                                                                        bool starts_in_reasoning) {
  std::shared_ptr<const scheduler::OutputConstraint> format = ReadOutputConstraint(ctx, body, starts_in_reasoning);
  if (!choice.forced()) {
    if (format || choice.mode != ToolChoice::Mode::kAuto || tools.is_null() ||
        ctx.tool_call_markup == ToolCallMarkup::kNone || !ctx.grammars) {
      return format;
    }
    // tool_choice auto with strict tools: calls the model chooses to make follow their schemas.
    const std::vector<tc::ToolSpec> specs = ToolSpecs(tools);
    if (std::none_of(specs.begin(), specs.end(), [](const tc::ToolSpec& s) { return s.strict; })) return nullptr;
    CheckSourceBytes(DumpJson(tools).size(), "tools");
    Wanted w{"tools", Or400(tc::AutoToolCallGrammar(FormatOf(ctx), specs), "tools"), "tool_calls"};
    return Compile(ctx, std::move(w), starts_in_reasoning);
  }
  if (format) {
    throw RequestError(400, "a forced tool_choice cannot be combined with response_format or another output "
                            "constraint", "tool_choice");
  }
  return ForcedToolCallConstraint(ctx, tools, choice, OptBool(body, "parallel_tool_calls").value_or(true));
}

}  // namespace sparkserve::head::http
