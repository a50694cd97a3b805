// Stop-string detection across streamed pieces (see stop_string_matcher.h): an Aho-Corasick
// automaton whose state depth is exactly the text that must be held back.
#include "text/tokenizer/stop_string_matcher.h"

#include <algorithm>
#include <deque>

#include "fmt/format.h"

namespace sparkserve::text {

absl::StatusOr<std::shared_ptr<const StopStringSet>> StopStringSet::Create(std::vector<std::string> stop_strings) {
  auto set = std::shared_ptr<StopStringSet>(new StopStringSet());
  set->nodes_.emplace_back();
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& s = stop_strings[i];
    if (s.empty()) return absl::InvalidArgumentError(fmt::format("stop string #{} is empty", i));
    set->max_len_ = std::max(set->max_len_, s.size());
    int32_t state = 0;
    for (unsigned char c : s) {
      int32_t next = set->Child(state, c);
      if (next < 0) {
        next = static_cast<int32_t>(set->nodes_.size());
        set->nodes_.emplace_back();
        set->nodes_.back().depth = set->nodes_[state].depth + 1;
        auto& ch = set->nodes_[state].children;
        ch.insert(std::upper_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1})), {c, next});
      }
      state = next;
    }
    if (set->nodes_[state].match < 0) set->nodes_[state].match = static_cast<int32_t>(i);
  }
  // Failure links breadth first; a node's match falls back to its failure's (a shorter stop
  // string ending at the same byte) when it ends none itself.
  std::deque<int32_t> queue;
  for (const auto& [c, child] : set->nodes_[0].children) queue.push_back(child);
  while (!queue.empty()) {
    const int32_t node = queue.front();
    queue.pop_front();
    for (const auto& [c, child] : set->nodes_[node].children) {
      int32_t f = set->nodes_[node].fail;
      while (f != 0 && set->Child(f, c) < 0) f = set->nodes_[f].fail;
      const int32_t target = set->Child(f, c);
      set->nodes_[child].fail = target >= 0 && target != child ? target : 0;
      if (set->nodes_[child].match < 0) set->nodes_[child].match = set->nodes_[set->nodes_[child].fail].match;
      queue.push_back(child);
    }
  }
  set->strings_ = std::move(stop_strings);
  return std::shared_ptr<const StopStringSet>(std::move(set));
}

int32_t StopStringSet::Child(int32_t state, unsigned char byte) const {
  const auto& ch = nodes_[state].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), byte,
                             [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
  return it != ch.end() && it->first == byte ? it->second : -1;
}

int32_t StopStringSet::Step(int32_t state, unsigned char byte) const {
  for (;;) {
    const int32_t next = Child(state, byte);
    if (next >= 0) return next;
    if (state == 0) return 0;
    state = nodes_[state].fail;
  }
}

absl::StatusOr<StopStringMatcher> StopStringMatcher::Create(std::vector<std::string> stop_strings,
                                                            bool include_stop) {
  auto set = StopStringSet::Create(std::move(stop_strings));
  if (!set.ok()) return set.status();
  return StopStringMatcher(std::move(*set), include_stop);
}

StopStringMatcher::StopStringMatcher(std::shared_ptr<const StopStringSet> set, bool include_stop)
    : set_(std::move(set)), include_stop_(include_stop) {}

StopStringMatcher::Output StopStringMatcher::Push(std::string_view piece) {
  Output out;
  if (stopped_ || piece.empty()) return out;
  if (!set_ || set_->empty()) {
    out.text.assign(piece);
    return out;
  }
  // held_ is exactly the automaton's depth: the longest suffix that may still start a stop.
  for (size_t i = 0; i < piece.size(); ++i) {
    state_ = set_->Step(state_, static_cast<unsigned char>(piece[i]));
    const int32_t match = set_->Match(state_);
    if (match < 0) continue;
    // The first stop completed, and the longest one ending at this byte.
    std::string text = held_;
    text.append(piece.substr(0, i + 1));
    const size_t stop_len = set_->strings()[static_cast<size_t>(match)].size();
    text.resize(include_stop_ ? text.size() : text.size() - stop_len);
    out.text = std::move(text);
    out.stop_index = static_cast<size_t>(match);
    stopped_ = true;
    held_.clear();
    return out;
  }
  const size_t hold = static_cast<size_t>(set_->Depth(state_));
  if (hold >= piece.size()) {  // everything new is held, with the tail of what was held before
    const size_t from_held = hold - piece.size();
    out.text = held_.substr(0, held_.size() - from_held);
    held_.erase(0, held_.size() - from_held);
    held_.append(piece);
  } else {
    out.text = std::move(held_);
    out.text.append(piece.substr(0, piece.size() - hold));
    held_.assign(piece.substr(piece.size() - hold));
  }
  return out;
}

std::string StopStringMatcher::Finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  state_ = 0;
  return out;
}

}  // namespace sparkserve::text
