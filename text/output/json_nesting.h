// The nesting bound on untrusted JSON text: parsing is iterative, but copies, dumps and
// conversions of the parsed value recurse once per level, so every parser of request bodies or
// model output checks the text's depth first (a few bytes of '[' must not overflow the stack).
#pragma once
#include <string_view>

namespace sparkserve::text {

inline constexpr int kMaxJsonNesting = 64;

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count);
// stops counting once past `limit` (returns limit + 1).
inline int JsonNestingDepth(std::string_view text, int limit = kMaxJsonNesting) {
  int depth = 0, deepest = 0;
  bool in_string = false, escape = false;
  for (char c : text) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return limit + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace sparkserve::text
