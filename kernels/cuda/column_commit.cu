// Column commit kernel: grid (commits, layers, 2: state | window), float4 copies where aligned.
#include <cstdint>

#include "kernels/cuda/column_commit_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

__global__ void CommitColumnsKernel(ColumnCommitLayers L, const int32_t* slots, const int32_t* columns) {
  const int i = blockIdx.x, l = blockIdx.y;
  const bool window = blockIdx.z == 1;
  const int64_t n = window ? L.window_floats : L.state_floats;
  const int64_t slot = slots[i], column = columns[i];
  float* dst = (window ? L.window[l] : L.state[l]) + slot * n;
  const float* src = (window ? L.column_window[l] : L.column_state[l]) + (slot * L.max_columns + column) * n;
  if (n % 4 == 0 && (reinterpret_cast<uintptr_t>(dst) % 16) == 0 && (reinterpret_cast<uintptr_t>(src) % 16) == 0) {
    const float4* s4 = reinterpret_cast<const float4*>(src);
    float4* d4 = reinterpret_cast<float4*>(dst);
    for (int64_t j = threadIdx.x; j < n / 4; j += blockDim.x) d4[j] = s4[j];
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src[j];
  }
}

}  // namespace

cudaError_t LaunchCommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                                cudaStream_t stream) {
  if (n == 0 || layers.num_layers == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(layers.num_layers), 2);
  CommitColumnsKernel<<<grid, 256, 0, stream>>>(layers, slots, columns);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
