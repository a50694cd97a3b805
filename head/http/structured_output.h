// Structured outputs on the HTTP APIs: the request fields that constrain the output, compiled
// into the engine's OutputConstraint (engine/grammar_constraint.h over text/constraint).
//
//   OpenAI    response_format: {"type": "json_object"} | {"type": "json_schema", "json_schema":
//             {"name", "schema", "strict"}} | {"type": "text"}
//   vLLM      guided_json, guided_regex, guided_choice, guided_grammar (GBNF / EBNF), and
//             structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object"}
//   llama.cpp grammar (GBNF), json_schema
// At most one of them. Bad, unsupported or unsatisfiable inputs are 400s naming the field (and the
// schema keyword). When the prompt leaves the model inside a reasoning block, the output is free
// until the reasoning ends (ServingContext::reasoning_end) and the constraint starts after it.
// Forced tool calls (tool_choice required or a named function) constrain the call and its
// arguments (tool_call_grammar.h).
#pragma once
#include <memory>
#include <string>

#include "head/http/json_io.h"
#include "head/http/serving_backend.h"
#include "head/http/tool_choice.h"
#include "scheduler/output_constraint.h"

namespace sparkserve::head::http {

// The constraint the body asks for; null when none. Throws RequestError (400).
std::shared_ptr<const scheduler::OutputConstraint> ReadOutputConstraint(const ServingContext& ctx, const Json& body,
                                                                        bool starts_in_reasoning);

// Chat requests: the forced tool call's constraint when tool_choice forces one, else the body's
// (both at once is a 400).
std::shared_ptr<const scheduler::OutputConstraint> ChatOutputConstraint(const ServingContext& ctx, const Json& body,
                                                                        const Json& tools, const ToolChoice& choice,
                                                                        bool starts_in_reasoning);

// The constraint of a forced tool call (`tools` OpenAI-shaped, as NormalizeChatTools gives them);
// null when the choice is not forced. Throws RequestError (400) for a strict tool whose schema
// cannot be enforced.
std::shared_ptr<const scheduler::OutputConstraint> ForcedToolCallConstraint(const ServingContext& ctx, const Json& tools,
                                                                            const ToolChoice& choice,
                                                                            bool parallel_tool_calls);

}  // namespace sparkserve::head::http
