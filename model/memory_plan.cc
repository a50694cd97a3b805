// PlanKvPages: the KV cache's share of the memory budget, in pages.
#include "model/memory_plan.h"

#include <algorithm>

#include "fmt/format.h"

namespace sparkserve::model {

absl::StatusOr<int32_t> PlanKvPages(const KvMemoryRequest& r) {
  if (!(r.utilization > 0.0 && r.utilization <= 1.0)) {
    return absl::InvalidArgumentError(
        fmt::format("--gpu-memory-utilization {} is outside (0, 1]", r.utilization));
  }
  if (r.page_size < 1 || r.max_seq_len < 1 || r.max_batch < 1) {
    return absl::InvalidArgumentError("KV planning needs a page size, max_seq_len and max_batch of at least 1");
  }
  const int64_t per_seq = (static_cast<int64_t>(r.max_seq_len) + r.page_size - 1) / r.page_size;
  const int64_t wanted = per_seq * r.max_batch;
  if (r.page_bytes <= 0) return static_cast<int32_t>(std::min<int64_t>(wanted, INT32_MAX));  // no attention layers
  const int64_t in_use = r.device_total - r.device_free;
  const int64_t budget = static_cast<int64_t>(r.utilization * static_cast<double>(r.device_total)) - in_use;
  const int64_t fits = std::max<int64_t>(budget, 0) / r.page_bytes;
  if (fits < per_seq) {
    const double gb = 1e-9;
    return absl::ResourceExhaustedError(fmt::format(
        "the KV cache does not fit: one {}-token sequence needs {} pages ({:.2f} GB), but {:.0f}% of the "
        "device's {:.1f} GB leaves {:.2f} GB after weights, state and activations ({:.1f} GB in use); lower "
        "--max-seq-len or --max-batch (state and activations scale with it), or raise --gpu-memory-utilization",
        r.max_seq_len, per_seq, per_seq * r.page_bytes * gb, r.utilization * 100, r.device_total * gb,
        std::max<int64_t>(budget, 0) * gb, in_use * gb));
  }
  return static_cast<int32_t>(std::min<int64_t>({fits, wanted, INT32_MAX}));
}

}  // namespace sparkserve::model
