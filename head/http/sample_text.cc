// SampleText: detokenize, match stop strings, parse.
#include "head/http/sample_text.h"

namespace sparkserve::head::http {

SampleText::SampleText(std::unique_ptr<IncrementalTextDecoder> decoder,
                       std::unique_ptr<PieceParser> parser,
                       std::shared_ptr<const text::StopStringSet> stop_strings, bool include_stop_str_in_output)
    : decoder_(std::move(decoder)),
      parser_(parser ? std::move(parser) : std::make_unique<PlainPieceParser>()),
      stop_(std::move(stop_strings), include_stop_str_in_output) {}

void AppendPieces(std::vector<OutputPiece>& out, std::vector<OutputPiece> pieces) {
  for (auto& p : pieces) {
    if (p.text.empty() && p.kind != OutputPiece::Kind::kToolCallName) continue;
    if (!out.empty() && out.back().kind == p.kind && p.kind != OutputPiece::Kind::kToolCallName &&
        out.back().tool_index == p.tool_index) {
      out.back().text += p.text;
    } else {
      out.push_back(std::move(p));
    }
  }
}

void SampleText::Release(std::string text, Update& out) {
  if (text.empty()) return;
  released_ += text;
  AppendPieces(out.pieces, parser_->Feed(text));
}

SampleText::Update SampleText::Push(std::span<const int32_t> ids) {
  Update out;
  if (stopped_ || finished_) return out;
  text::StopStringMatcher::Output o = stop_.Push(decoder_->Push(ids));
  Release(std::move(o.text), out);
  if (o.stop_index) {
    stopped_ = true;
    AppendPieces(out.pieces, parser_->Finish());
    out.stop_string = stop_.set()->strings().at(*o.stop_index);
  }
  return out;
}

SampleText::Update SampleText::Finish() {
  Update out;
  if (finished_) return out;
  finished_ = true;
  if (stopped_) return out;
  text::StopStringMatcher::Output o = stop_.Push(decoder_->Flush());
  Release(std::move(o.text), out);
  if (o.stop_index) {
    out.stop_string = stop_.set()->strings().at(*o.stop_index);
  } else {
    Release(stop_.Finish(), out);
  }
  AppendPieces(out.pieces, parser_->Finish());
  return out;
}

}  // namespace sparkserve::head::http
