// SampleText: detokenize, match stop strings, parse.
#include "head/http/sample_text.h"

#include <algorithm>

namespace sparkserve::http {

SampleText::SampleText(std::unique_ptr<IncrementalTextDecoder> decoder,
                       std::unique_ptr<OutputParser> parser, std::vector<std::string> stop_strings,
                       bool include_stop_str_in_output)
    : decoder_(std::move(decoder)),
      parser_(parser ? std::move(parser) : std::make_unique<PlainOutputParser>()),
      include_stop_(include_stop_str_in_output) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stop_strings_.push_back(std::move(s));
  }
}

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
  held_ += decoder_->Push(ids);
  if (stop_strings_.empty()) {
    Release(std::move(held_), out);
    held_.clear();
    return out;
  }
  // Earliest match of any stop string (the longest one when two start at the same place).
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const auto& s : stop_strings_) {
    size_t pos = held_.find(s);
    if (pos != std::string::npos &&
        (pos < best || (pos == best && s.size() > best_stop->size()))) {
      best = pos;
      best_stop = &s;
    }
  }
  if (best_stop) {
    stopped_ = true;
    Release(held_.substr(0, best + (include_stop_ ? best_stop->size() : 0)), out);
    held_.clear();
    AppendPieces(out.pieces, parser_->Finish());
    out.stop_string = *best_stop;
    return out;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const auto& s : stop_strings_) {
    size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  std::string release = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  Release(std::move(release), out);
  return out;
}

SampleText::Update SampleText::Finish() {
  Update out;
  if (finished_) return out;
  finished_ = true;
  if (stopped_) return out;
  std::string tail = std::move(held_) + decoder_->Flush();
  held_.clear();
  Release(std::move(tail), out);
  AppendPieces(out.pieces, parser_->Finish());
  return out;
}

}  // namespace sparkserve::http
