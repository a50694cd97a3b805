// Fixed-tag search for streaming parsers: the earliest complete tag in a text, and the start of
// the text's tail that could still grow into a tag (held back until more text decides it).
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace sparkserve::text {

struct TagMatch {
  size_t pos = std::string_view::npos;  // npos: no complete tag
  size_t tag = 0;                       // index into the tag list
  bool found() const { return pos != std::string_view::npos; }
};

// The leftmost complete occurrence of any tag (on a tie, the first listed).
TagMatch FindFirstTag(std::string_view text, std::initializer_list<std::string_view> tags);

// Start of the longest suffix of `text` that is a proper, non-empty prefix of some tag
// (text.size() when there is none). Everything before it can be released now.
size_t HeldSuffixStart(std::string_view text, std::initializer_list<std::string_view> tags);

// Whether `text` is a proper prefix of `tag` (shorter and equal so far).
inline bool IsProperPrefixOf(std::string_view text, std::string_view tag) {
  return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

}  // namespace sparkserve::text
