// StopStringMatcher: finds stop strings in streamed text (pieces of any size, a stop string may
// span several). Text that could be the start of a stop string is held back until decided; the
// stop string itself is withheld unless include_stop is set; nothing is emitted after a stop. The
// stop is the first one completed while reading left to right (earliest end; on a tie, the longest),
// so pushing the text in any split gives the same output as pushing it whole.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::text {

class StopStringMatcher {
 public:
  // Empty stop strings are refused (InvalidArgument). No stop strings: everything passes through.
  static absl::StatusOr<StopStringMatcher> Create(std::vector<std::string> stop_strings, bool include_stop = false);

  struct Output {
    std::string text;                 // safe to send now
    std::optional<size_t> stop_index; // set once a stop string is found (index into the list)
  };
  // Feeds generated text. After a stop, further pushes return nothing.
  Output Push(std::string_view piece);
  // End of generation without a stop: releases the held-back text.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // How many bytes may be held back at most (longest stop string - 1).
  size_t max_held_bytes() const { return max_len_ == 0 ? 0 : max_len_ - 1; }

 private:
  StopStringMatcher() = default;
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t HeldSuffixLength() const;

  std::vector<std::string> stops_;
  bool include_stop_ = false;
  size_t max_len_ = 0;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sparkserve::text
