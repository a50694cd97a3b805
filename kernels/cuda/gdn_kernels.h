// Internal to kernels/cuda: the Gated DeltaNet launchers (gdn.cu) and the limits their kernels are
// built for, shared with the argument checks in gdn.cc. No fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/gdn.h"
#include "kernels/cuda/ragged_batch.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kConvMaxKernel = 8;  // CausalConv1dSilu: K in [1, 8] (templated on K)

// GatedDeltaNet: each block owns 16 value columns (4 float4 groups) of one (seq, value head); the
// blocks of a head form one thread-block cluster (at most 8, the portable size), so dv <= 128.
inline constexpr int kGdnSliceColumns = 16;
inline constexpr int kGdnMaxSlices = 8;
inline constexpr int kGdnMaxDv = kGdnSliceColumns * kGdnMaxSlices;
inline constexpr int kGdnMaxDk = 256;  // 32 row groups x at most 8 rows a thread
inline constexpr int kGdnMaxSeqs = 65535;  // grid.z

cudaError_t LaunchCausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                                   const RaggedBatchDevice& batch, float* window, float* column_window,
                                   int max_columns, float* out, cudaStream_t stream);

cudaError_t LaunchGatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                const float* norm_w, float eps, const RaggedBatchDevice& batch, float* state,
                                float* column_state, int max_columns, __half* out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
