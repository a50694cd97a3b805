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

// Seqs with at most this many tokens in a step take the split-K kernel's per-token path; longer
// ones its tile path or the flash prefill kernel.
inline constexpr int kPerTokenMaxTokens = 4;

// The split-K kernel (and its combine). skip_long_seqs: tokens of seqs with > kPerTokenMaxTokens
// tokens are left alone (the flash prefill kernel writes them).
cudaError_t LaunchPagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                 const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                 int gate_head_stride, __half* out, float* workspace, bool skip_long_seqs,
                                 cudaStream_t stream);

// The flash prefill kernel (prefill_attention.cu) over the seqs with > kPerTokenMaxTokens tokens.
enum class PrefillTile { kLarge, kSmall };  // 128 query rows x 64 keys a block / 64 x 32
// Whether the flash kernel takes head_dim x group (heads / kv_heads) at all.
bool PrefillAttentionSupports(int head_dim, int group);
// Dynamic shared memory of a block (bytes), and whether this device can give it.
size_t PrefillAttentionSmemBytes(PrefillTile tile, int head_dim, KvDtype dtype);
bool PrefillAttentionFits(PrefillTile tile, int head_dim, KvDtype dtype);
cudaError_t LaunchPrefillAttention(PrefillTile tile, const float* q, int heads, float scale, const KvPoolDevice& kv,
                                   const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                   int gate_head_stride, __half* out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
