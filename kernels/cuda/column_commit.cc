// CommitColumns: the absl::Status wrapper of column_commit.cu.
#include "kernels/cuda/column_commit.h"

#include "kernels/cuda/column_commit_kernels.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::kernels::cuda {

absl::Status CommitColumns(const ColumnCommitLayers& layers, const int32_t* slots, const int32_t* columns, int n,
                           cudaStream_t stream) {
  if (n < 0 || layers.max_columns < 1) return absl::InvalidArgumentError("CommitColumns: bad sizes");
  return CudaStatus(LaunchCommitColumns(layers, slots, columns, n, stream), "CommitColumns");
}

}  // namespace sparkserve::kernels::cuda
