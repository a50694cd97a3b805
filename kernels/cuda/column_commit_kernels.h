// Column commit kernel interface (no absl: nvcc compiles the .cu); column_commit.h wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparkserve::kernels::cuda {

// Per GDN layer l: state[l] f32 [num_slots, state_floats] and column_state[l] f32 [num_slots,
// max_columns, state_floats] (the recurrent state), window[l] / column_window[l] likewise with
// window_floats (the conv window). Device arrays of num_layers pointers each.
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

cudaError_t LaunchCommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                                cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
