// Column commit (speculative decoding): after a verify forward that kept the GDN recurrent state
// and conv window after every column, the accepted column's copy becomes the slot's state, for
// every GDN layer at once (one launch a step, however many sequences commit).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace sparkserve::kernels::cuda {

// Per GDN layer l: state[l] f32 [num_slots, state_floats] and column_state[l] f32 [num_slots,
// max_columns, state_floats] (the recurrent state), window[l] / column_window[l] likewise with
// window_floats (the conv window). Device arrays of num_layers pointers each. For each i < n:
// state[l][slots[i]] = column_state[l][slots[i], columns[i]] (columns[i] < max_columns), and the
// same for the window. slots / columns: device int32 [n]. Slots must be distinct.
struct ColumnCommitLayers {
  float* const* state = nullptr;
  const float* const* column_state = nullptr;
  float* const* window = nullptr;
  const float* const* column_window = nullptr;
  int num_layers = 0;
  int64_t state_floats = 0;
  int64_t window_floats = 0;
  int max_columns = 0;
};
absl::Status CommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                           cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
