// Tag search helpers shared by the reasoning and tool-call parsers.
#include "text/output/partial_tag.h"

#include <algorithm>

namespace sparkserve::text {

TagMatch FindFirstTag(std::string_view text, std::initializer_list<std::string_view> tags) {
  TagMatch best;
  size_t i = 0;
  for (std::string_view tag : tags) {
    size_t pos = text.find(tag);
    if (pos != std::string_view::npos && (!best.found() || pos < best.pos)) {
      best.pos = pos;
      best.tag = i;
    }
    ++i;
  }
  return best;
}

size_t HeldSuffixStart(std::string_view text, std::initializer_list<std::string_view> tags) {
  size_t longest_tag = 0;
  for (std::string_view tag : tags) longest_tag = std::max(longest_tag, tag.size());
  size_t first = text.size() >= longest_tag ? text.size() - longest_tag + 1 : 0;
  for (size_t i = first; i < text.size(); ++i) {
    std::string_view tail = text.substr(i);
    for (std::string_view tag : tags) {
      if (IsProperPrefixOf(tail, tag)) return i;
    }
  }
  return text.size();
}

}  // namespace sparkserve::text
