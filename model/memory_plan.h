// Sizing a runner's KV cache from device memory (serve --gpu-memory-utilization): what is left of
// the budget once weights, state and activations are in place, in whole pages, refused with a
// message naming what to lower when not even one sequence of max_seq_len fits.
#pragma once
#include <cstdint>

#include "absl/status/statusor.h"

namespace sparkserve::model {

struct KvMemoryRequest {
  double utilization = 0.9;      // fraction of the device's total memory this process may hold
  int64_t device_total = 0;      // bytes of device memory
  int64_t device_free = 0;       // bytes free now (weights, state and activations already allocated)
  int64_t page_bytes = 0;        // one KV page over every attention layer (K and V)
  int32_t page_size = 16;        // tokens per page
  int32_t max_seq_len = 0;       // the longest sequence must fit
  int32_t max_batch = 0;         // more pages than max_batch full sequences are never needed
};

// Pages to allocate: min(what the budget holds, max_batch * pages per sequence). The budget is
// utilization * total minus what is already in use (total - free). Errors: a utilization outside
// (0, 1], or fewer pages than one max_seq_len sequence needs.
absl::StatusOr<int32_t> PlanKvPages(const KvMemoryRequest& r);

}  // namespace sparkserve::model
