// The model-output parser of text/output (reasoning <think> blocks, Qwen tool calls) behind
// the HTTP layer's PieceParser interface.
#pragma once
#include "text/output/output_parser.h"
#include "head/http/serving_backend.h"

namespace sparkserve::head::http {

// Parsers of `family`'s markup, configured per request (reasoning start, tools and their schemas).
PieceParserFactory MakeModelPieceParserFactory(text::ModelFamily family);

// The tool-call form `family`'s parser reads (what a forced tool_choice appends).
ToolCallMarkup ToolCallMarkupFor(text::ModelFamily family);

}  // namespace sparkserve::head::http
