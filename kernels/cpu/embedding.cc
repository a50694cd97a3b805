// Embedding gather (CPU fp32).
#include <cstring>
#include <string>

#include "fmt/format.h"
#include "kernels/cpu/ops.h"

namespace sparkserve::kernels::cpu {

absl::Status EmbeddingGather(const float* table, int64_t vocab, int64_t dim,
                             std::span<const int32_t> ids, float* out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(
          fmt::format("token id {} at index {} is outside the vocabulary [0, {})", ids[i], i, vocab));
    }
    std::memcpy(out + static_cast<int64_t>(i) * dim, table + static_cast<int64_t>(ids[i]) * dim,
                sizeof(float) * dim);
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::kernels::cpu
