// SampleText: one sample's text path on the HTTP side: generated ids -> incremental detokenizer ->
// stop strings (matched on the decoded text, the match and what follows withheld) -> output parser
// (reasoning / tool calls). Only text that can no longer be part of a stop string is released.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "head/http/serving_backend.h"
#include "text/tokenizer/stop_string_matcher.h"

namespace sparkserve::head::http {

class SampleText {
 public:
  // `stop_strings` (null: none) is compiled once per request and shared by its samples.
  SampleText(std::unique_ptr<IncrementalTextDecoder> decoder, std::unique_ptr<PieceParser> parser,
             std::shared_ptr<const text::StopStringSet> stop_strings, bool include_stop_str_in_output);

  struct Update {
    std::vector<OutputPiece> pieces;
    std::optional<std::string> stop_string;  // set when a stop string ended the sample
  };

  // New ids. After a stop string matched, nothing more is released.
  Update Push(std::span<const int32_t> ids);
  // End of the sample (engine finished it): releases the held-back tail.
  Update Finish();

  bool stopped() const { return stopped_; }
  // Every byte released so far before parsing (for tests and logs).
  const std::string& released_text() const { return released_; }

 private:
  void Release(std::string text, Update& out);

  std::unique_ptr<IncrementalTextDecoder> decoder_;
  std::unique_ptr<PieceParser> parser_;
  text::StopStringMatcher stop_;
  std::string released_;
  bool stopped_ = false;
  bool finished_ = false;
};

// Appends `pieces` to `out`, merging neighbours of the same kind (and tool index).
void AppendPieces(std::vector<OutputPiece>& out, std::vector<OutputPiece> pieces);

}  // namespace sparkserve::head::http
