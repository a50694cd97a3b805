// NgramDrafter: prompt lookup over the sequence's own tokens.
#include "engine/drafter.h"

#include <algorithm>
#include <cstddef>

namespace sparkserve::engine {

std::vector<int32_t> NgramDrafter::Propose(std::span<const int32_t> tokens, int32_t max_drafts) {
  const auto L = static_cast<std::ptrdiff_t>(tokens.size());
  if (max_drafts <= 0) return {};
  for (std::ptrdiff_t n = std::min<std::ptrdiff_t>(max_n_, L - 1); n >= min_n_; --n) {
    const auto suffix = tokens.subspan(static_cast<size_t>(L - n));
    // The most recent earlier occurrence: its start i < L - n, scanning back from the end.
    for (std::ptrdiff_t i = L - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const std::ptrdiff_t from = i + n;
      const std::ptrdiff_t to = std::min<std::ptrdiff_t>(L, from + max_drafts);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

}  // namespace sparkserve::engine
