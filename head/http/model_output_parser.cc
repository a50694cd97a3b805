// Adapter: text::OutputParser events -> http::OutputPiece.
#include "head/http/model_output_parser.h"

#include "spdlog/spdlog.h"

namespace sparkserve::head::http {

namespace {

class ModelPieceParser : public PieceParser {
 public:
  // `forced_output`: prompt text the parser reads first, as if generated; its pieces are held and
  // come out in front of the first Feed/Finish result.
  ModelPieceParser(text::OutputParserOptions options, const std::string& forced_output)
      : parser_(std::move(options)) {
    if (!forced_output.empty()) held_ = Convert(parser_.Feed(forced_output));
  }
  std::vector<OutputPiece> Feed(std::string_view text) override {
    return WithHeld(Convert(parser_.Feed(text)));
  }
  std::vector<OutputPiece> Finish() override { return WithHeld(Convert(parser_.Finish())); }

 private:
  std::vector<OutputPiece> WithHeld(std::vector<OutputPiece> pieces) {
    if (held_.empty()) return pieces;
    std::vector<OutputPiece> out = std::move(held_);
    held_.clear();
    out.insert(out.end(), std::make_move_iterator(pieces.begin()), std::make_move_iterator(pieces.end()));
    return out;
  }

  static std::vector<OutputPiece> Convert(const text::OutputEvents& events) {
    std::vector<OutputPiece> out;
    for (const auto& e : events) {
      switch (e.kind) {
        case text::OutputEventKind::kReasoningDelta:
          out.push_back({OutputPiece::Kind::kReasoning, 0, e.text});
          break;
        case text::OutputEventKind::kContentDelta:
          out.push_back({OutputPiece::Kind::kContent, 0, e.text});
          break;
        case text::OutputEventKind::kToolCallStart:
          out.push_back({OutputPiece::Kind::kToolCallName, e.index, e.name});
          break;
        case text::OutputEventKind::kToolCallArgumentsDelta:
          out.push_back({OutputPiece::Kind::kToolCallArguments, e.index, e.text});
          break;
        case text::OutputEventKind::kToolCallEnd:
          break;  // the call's markup: removed from the output by design
      }
    }
    return out;
  }
  text::OutputParser parser_;
  std::vector<OutputPiece> held_;
};

}  // namespace

PieceParserFactory MakeModelPieceParserFactory(text::ModelFamily family) {
  return [family](const PieceParserOptions& o) -> PieceParserMaker {
    text::OutputParserOptions opts = text::OutputParserOptions::ForFamily(family);
    opts.parse_reasoning = opts.parse_reasoning && o.parse_reasoning;
    if (o.parse_tool_calls && o.tools.is_array()) {
      // Once per request; the samples' parsers share the schemas.
      auto schemas = text::ToolSchemas::FromTools(nlohmann::json::parse(o.tools.dump()));
      if (!schemas.ok()) {
        spdlog::warn("http: tool schemas not usable ({}); tool-call values stay text",
                     std::string(schemas.status().message()));
        opts.WithTools(text::ToolSchemas());
      } else {
        opts.WithTools(std::move(*schemas));
      }
    }
    opts.StartingInReasoning(o.starts_in_reasoning);
    return [opts = std::move(opts), forced = o.forced_output]() -> std::unique_ptr<PieceParser> {
      return std::make_unique<ModelPieceParser>(opts, forced);
    };
  };
}

ToolCallMarkup ToolCallMarkupFor(text::ModelFamily family) {
  switch (family) {
    case text::ModelFamily::kQwen3: return ToolCallMarkup::kQwenJson;
    case text::ModelFamily::kQwen3_5: return ToolCallMarkup::kQwenXml;
    default: return ToolCallMarkup::kNone;
  }
}

}  // namespace sparkserve::head::http
