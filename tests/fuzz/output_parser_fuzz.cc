// libFuzzer target for the model-output parsers (reasoning, Qwen XML and JSON tool calls): input =
// one flags byte, then the model's text. The text is fed whole and again in pieces cut where the
// input says; both must give the same events (the parsers promise any cut gives the same result),
// and neither may crash, hang or trip a sanitizer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "text/output/output_parser.h"

namespace {
using sparkserve::text::OutputEvent;
using sparkserve::text::OutputEventKind;
using sparkserve::text::OutputEvents;

// Adjacent deltas of one kind (and call) merged: the form that does not depend on the cuts.
void Append(std::vector<OutputEvent>& out, const OutputEvents& events) {
  for (const OutputEvent& e : events) {
    const bool delta = e.kind == OutputEventKind::kReasoningDelta || e.kind == OutputEventKind::kContentDelta ||
                       e.kind == OutputEventKind::kToolCallArgumentsDelta;
    if (delta && e.text.empty()) continue;
    if (delta && !out.empty() && out.back().kind == e.kind && out.back().index == e.index) {
      out.back().text += e.text;
    } else {
      out.push_back(e);
    }
  }
}

sparkserve::text::OutputParserOptions Options(uint8_t flags) {
  using namespace sparkserve::text;
  const ModelFamily family = (flags & 3) == 0 ? ModelFamily::kNone : (flags & 3) == 1 ? ModelFamily::kQwen3 : ModelFamily::kQwen3_5;
  OutputParserOptions o = OutputParserOptions::ForFamily(family);
  if (flags & 4) {
    auto tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
         "units": {"type": ["string", "null"]}, "opts": {"type": "object"}, "ok": {"type": "boolean"}}}}},
        {"name": "search", "input_schema": {"type": "object", "properties": {"q": {"type": "array"}}}}])");
    o.WithTools(*ToolSchemas::FromTools(tools));
  }
  o.StartingInReasoning(flags & 8);
  auto counter = std::make_shared<int>(0);
  o.make_tool_call_id = [counter] { return "call_" + std::to_string((*counter)++); };
  return o;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sparkserve::text;
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<OutputEvent> whole, pieces;
  OutputParser a(Options(flags));
  Append(whole, a.Feed(text));
  Append(whole, a.Finish());

  // Cuts from the text's own bytes: a piece ends after each byte whose low bits are 0.
  OutputParser b(Options(flags));
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) * 7 + i) % 5 == 0 || (flags & 16)) {
      Append(pieces, b.Feed(text.substr(start, i + 1 - start)));
      start = i + 1;
    }
  }
  Append(pieces, b.Feed(text.substr(start)));
  Append(pieces, b.Finish());
  if (whole != pieces) {
    std::fprintf(stderr, "events differ between whole and pieced feeding (%zu vs %zu events)\n", whole.size(),
                 pieces.size());
    std::abort();
  }
  return 0;
}
