// StopStringMatcher: finds stop strings in streamed text (pieces of any size, a stop string may
// span several). Text that could be the start of a stop string is held back until decided; the
// stop string itself is withheld unless include_stop is set; nothing is emitted after a stop. The
// stop is the first one completed while reading left to right (earliest end; on a tie, the longest),
// so pushing the text in any split gives the same output as pushing it whole.
//
// The stop strings compile once into a StopStringSet (an Aho-Corasick automaton over bytes), which
// the n samples of a request share; each sample's matcher holds only its automaton state and the
// held-back text. Matching costs O(1) amortised per byte, whatever the number and length of stops.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::text {

class StopStringSet {
 public:
  // Empty stop strings are refused (InvalidArgument).
  static absl::StatusOr<std::shared_ptr<const StopStringSet>> Create(std::vector<std::string> stop_strings);

  const std::vector<std::string>& strings() const { return strings_; }
  bool empty() const { return strings_.empty(); }
  size_t max_len() const { return max_len_; }

  // The automaton. State 0 is the root (nothing matched).
  int32_t Step(int32_t state, unsigned char byte) const;
  // Bytes of the longest suffix of the text read that is a prefix of some stop string.
  int32_t Depth(int32_t state) const { return nodes_[state].depth; }
  // The longest stop string ending at this state (first listed on equal strings), or -1.
  int32_t Match(int32_t state) const { return nodes_[state].match; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t fail = 0;
    int32_t depth = 0;
    int32_t match = -1;
  };
  int32_t Child(int32_t state, unsigned char byte) const;

  std::vector<std::string> strings_;
  size_t max_len_ = 0;
  std::vector<Node> nodes_;
};

class StopStringMatcher {
 public:
  // Compiles `stop_strings` for this matcher alone (see StopStringSet::Create for errors). No stop
  // strings: everything passes through.
  static absl::StatusOr<StopStringMatcher> Create(std::vector<std::string> stop_strings, bool include_stop = false);
  // A matcher over a shared, compiled set (null: no stop strings).
  explicit StopStringMatcher(std::shared_ptr<const StopStringSet> set, bool include_stop = false);

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
  size_t max_held_bytes() const { return !set_ || set_->max_len() == 0 ? 0 : set_->max_len() - 1; }
  const StopStringSet* set() const { return set_.get(); }

 private:
  std::shared_ptr<const StopStringSet> set_;
  bool include_stop_ = false;
  int32_t state_ = 0;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sparkserve::text
