// NgramDrafter: prompt lookup over the sequence's own tokens.
#include "engine/drafter.h"

#include <algorithm>
#include <cstddef>

namespace sparkserve::engine {

std::vector<int32_t> NgramDrafter::Propose(std::span<const int32_t> tokens, int32_t max_drafts) {
  const auto L = static_cast<std::ptrdiff_t>(tokens.size());
  if (max_drafts <= 0 || L < 2) return {};
  // One backward pass over the earlier positions e where the last token occurred: the suffix's match
  // ending at e is m tokens long (at most max_n). The longest match wins, the most recent (largest
  // e) among equally long ones; a match of max_n ends the scan. One pass instead of one per n: the
  // engine thread runs this for every decoding sequence every step.
  const int32_t last = tokens[static_cast<size_t>(L - 1)];
  std::ptrdiff_t best_end = -1, best_len = min_n_ - 1;
  for (std::ptrdiff_t e = L - 2; e >= 0; --e) {
    if (tokens[static_cast<size_t>(e)] != last) continue;
    const std::ptrdiff_t most = std::min<std::ptrdiff_t>(max_n_, e + 1);
    std::ptrdiff_t m = 1;
    while (m < most && tokens[static_cast<size_t>(e - m)] == tokens[static_cast<size_t>(L - 1 - m)]) ++m;
    if (m > best_len) {
      best_len = m;
      best_end = e;
      if (m == max_n_) break;
    }
  }
  if (best_end < 0) return {};
  const std::ptrdiff_t from = best_end + 1;
  const std::ptrdiff_t to = std::min<std::ptrdiff_t>(L, from + max_drafts);
  return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
}

}  // namespace sparkserve::engine
