// Launcher of column_commit.cu (no absl: nvcc); column_commit.cc wraps it.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace sparkserve::kernels::cuda {

struct ColumnCommitLayers;
cudaError_t LaunchCommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                                cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
