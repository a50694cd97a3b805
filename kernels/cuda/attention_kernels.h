// Internal to kernels/cuda: the attention launchers (attention.cu) and the split-K plan they share
// with the host wrappers (attention.cc). No absl/fmt calls here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/cuda/attention.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kAttnMaxHeadDim = 256;  // 8 dims a lane, 32 lanes a key
inline constexpr int kAttnMaxSplits = 64;

// Number of context splits of a step of `num_tokens` tokens: enough blocks to fill the GPU at
// decode, 1 (no workspace, the attention kernel writes the output itself) once the tokens alone
// fill it. Depends only on host-fixed sizes, never on context lengths (CUDA-graph safe).
int AttentionSplits(int num_tokens);

// Workspace floats of the split partials for `num_tokens` tokens split `splits` ways:
// acc [splits, T, heads, head_dim], then m and l [splits, T, heads]. Zero when splits == 1.
size_t AttentionPartialFloats(int splits, int num_tokens, int heads, int head_dim);

cudaError_t LaunchQkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps,
                                    int heads, int rot_dim, float rope_theta, const RaggedBatchDevice& batch,
                                    const KvPoolDevice& kv, float* q_out, cudaStream_t stream);

cudaError_t LaunchPagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                 const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                 int gate_head_stride, __half* out, float* workspace, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
