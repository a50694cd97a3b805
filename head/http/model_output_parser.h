// The model-output parser of head/chat/output (reasoning <think> blocks, Qwen tool calls) behind
// the HTTP layer's OutputParser interface.
#pragma once
#include "head/chat/output/output_parser.h"
#include "head/http/serving_backend.h"

namespace sparkserve::http {

// Parsers of `family`'s markup, configured per request (reasoning start, tools and their schemas).
OutputParserFactory MakeModelOutputParserFactory(chat::ModelFamily family);

// The tool-call form `family`'s parser reads (what a forced tool_choice appends).
ToolCallMarkup ToolCallMarkupFor(chat::ModelFamily family);

}  // namespace sparkserve::http
