// SSE line splitting and event assembly (see sse_parser.h); accepts \n, \r\n and \r line ends.
#include "bench/sse_parser.h"

namespace sparkserve::bench {

void SseParser::Feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      if (!partial_line_.empty() && partial_line_.back() == '\r') partial_line_.pop_back();
      Line(partial_line_);
      partial_line_.clear();
    } else {
      partial_line_.push_back(c);
    }
  }
}

void SseParser::Finish() {
  if (!partial_line_.empty()) {
    if (partial_line_.back() == '\r') partial_line_.pop_back();
    Line(partial_line_);
    partial_line_.clear();
  }
  Line("");
}

void SseParser::Line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) {
      std::string data;
      data.swap(data_);
      has_data_ = false;
      on_data_(data);
    }
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace sparkserve::bench
