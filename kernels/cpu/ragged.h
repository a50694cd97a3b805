// Flat work items over a ragged batch: item i of the step -> (sequence, index within it), so a
// ParallelFor can spread sequences x heads (or x channels) across threads.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace sparkserve::kernels::cpu {

class RaggedItems {
 public:
  // counts[s]: items of sequence s.
  explicit RaggedItems(const std::vector<int64_t>& counts) : begin_(counts.size() + 1, 0) {
    for (size_t s = 0; s < counts.size(); ++s) begin_[s + 1] = begin_[s] + counts[s];
  }
  int64_t total() const { return begin_.back(); }
  // The sequence holding flat item i, and i's index inside it.
  std::pair<int64_t, int64_t> Locate(int64_t i) const {
    const auto it = std::upper_bound(begin_.begin(), begin_.end(), i);
    const int64_t s = static_cast<int64_t>(it - begin_.begin()) - 1;
    return {s, i - begin_[s]};
  }

 private:
  std::vector<int64_t> begin_;
};

}  // namespace sparkserve::kernels::cpu
