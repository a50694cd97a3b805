// Stop-string detection across streamed pieces (see stop_string_matcher.h).
#include "text/tokenizer/stop_string_matcher.h"

#include <algorithm>

#include "fmt/format.h"

namespace sparkserve::text {

absl::StatusOr<StopStringMatcher> StopStringMatcher::Create(std::vector<std::string> stop_strings,
                                                            bool include_stop) {
  StopStringMatcher m;
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) {
      return absl::InvalidArgumentError(fmt::format("stop string #{} is empty", i));
    }
    m.max_len_ = std::max(m.max_len_, stop_strings[i].size());
  }
  m.stops_ = std::move(stop_strings);
  m.include_stop_ = include_stop;
  return m;
}

size_t StopStringMatcher::HeldSuffixLength() const {
  const size_t limit = std::min(held_.size(), max_held_bytes());
  for (size_t len = limit; len > 0; --len) {
    const std::string_view suffix = std::string_view(held_).substr(held_.size() - len);
    for (const std::string& s : stops_) {
      if (s.size() > len && std::string_view(s).substr(0, len) == suffix) return len;
    }
  }
  return 0;
}

StopStringMatcher::Output StopStringMatcher::Push(std::string_view piece) {
  Output out;
  if (stopped_ || piece.empty()) return out;
  if (stops_.empty()) {
    out.text.assign(piece);
    return out;
  }
  const size_t old_size = held_.size();
  held_.append(piece);
  // A stop completed by this piece ends after old_size. Earlier ends were ruled out by earlier
  // pushes, and a match cannot start before the held text (held_ keeps the longest candidate).
  for (size_t end = old_size + 1; end <= held_.size(); ++end) {
    std::optional<size_t> best;
    for (size_t i = 0; i < stops_.size(); ++i) {
      const std::string& s = stops_[i];
      if (s.size() > end) continue;
      if (std::string_view(held_).substr(end - s.size(), s.size()) != s) continue;
      if (!best || s.size() > stops_[*best].size()) best = i;
    }
    if (best) {
      const size_t keep = include_stop_ ? end : end - stops_[*best].size();
      out.text = held_.substr(0, keep);
      out.stop_index = best;
      stopped_ = true;
      held_.clear();
      return out;
    }
  }
  const size_t hold = HeldSuffixLength();
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringMatcher::Finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace sparkserve::text
