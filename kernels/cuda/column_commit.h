// Column commit (speculative decoding): after a verify forward that kept the GDN recurrent state
// and conv window after every column, the accepted column's copy becomes the slot's state, for
// every GDN layer at once (one launch a step, however many sequences commit).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/column_commit_kernels.h"

namespace sparkserve::kernels::cuda {

// For each i < n and layer l: state[l][slots[i]] = column_state[l][slots[i], columns[i]]
// (columns[i] < max_columns), and the same for the window. slots / columns: device int32 [n];
// slots distinct.
absl::Status CommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                           cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
