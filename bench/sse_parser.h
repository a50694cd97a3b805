// SseParser: incremental Server-Sent Events decoder for OpenAI streaming responses. Bytes arrive in
// arbitrary pieces; each complete event's `data:` payload (several data lines joined by "\n") is
// handed to the callback. Comments (":...") and other fields (event:, id:, retry:) are ignored.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace sparkserve::bench {

class SseParser {
 public:
  using DataCallback = std::function<void(std::string_view data)>;
  explicit SseParser(DataCallback on_data) : on_data_(std::move(on_data)) {}

  void Feed(std::string_view bytes);
  // End of stream: dispatches an event left without its terminating blank line.
  void Finish();

 private:
  void Line(std::string_view line);
  DataCallback on_data_;
  std::string partial_line_;
  std::string data_;
  bool has_data_ = false;
};

}  // namespace sparkserve::bench
