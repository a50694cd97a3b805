// Grammars for forced tool calls: the rest of the output once the prompt ends with the forced start
// of a call (head/http/tool_choice.h), so that the call is well formed and its arguments follow the
// function's parameter schema.
//
//   Qwen3.5 XML:  <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//     A string parameter's VALUE is its text (no '<', within minLength/maxLength, or the enum /
//     pattern / format); other types are JSON text of the parameter's schema (what the output
//     parser's ConvertParameterValue turns back into that type). Parameters come in the schema's
//     order; required ones always, optional ones may be left out.
//   Qwen3 JSON:   <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, ARGS per the schema.
//
// Named choice: the forced text ends right after the function is named ("<function=NAME>\n", or
// `"arguments": `); the grammar is the rest of that one call (and no other). Required: the forced text is
// "<tool_call>\n"; the grammar picks one of the functions, then (parallel_tool_calls) may add more
// calls, each opened by "\n<tool_call>\n".
// A strict tool's schema must convert (errors name the tool and keyword); a non-strict tool whose
// schema does not convert gets free-form arguments instead.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "text/constraint/grammar.h"

namespace sparkserve::text::constraint {

enum class ToolCallFormat { kQwenXml, kQwenJson };

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // JSON schema of the arguments (an object schema; null: none)
  bool strict = false;
};

// `named`: the forced function (must be among `tools`); nullopt: any of them (tool_choice required).
absl::StatusOr<Grammar> ForcedToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                              const std::optional<std::string>& named, bool parallel_calls);

// tool_choice auto with strict tools: free text, except that "<tool_call>" can only be written as
// the opening of a well-formed call whose arguments follow its function's schema; text may follow
// each call.
absl::StatusOr<Grammar> AutoToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools);

// Adds rules matching any text that does not contain `marker` (one rule per matched prefix of the
// marker, as the states of a Knuth-Morris-Pratt matcher) and returns the expression of that text.
ExprPtr TextWithout(Grammar& g, std::string_view marker, std::string_view prefix);

}  // namespace sparkserve::text::constraint
