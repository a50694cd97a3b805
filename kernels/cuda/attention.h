// Gated full attention on CUDA over the paged bf16 KV cache (FORMATS.md §1): the fused
// q/k-norm + partial RoPE + KV write, and causal GQA attention for ragged steps (prefill chunks,
// decode, MTP verify) with the output gate sigmoid(gate) applied on the way out. CPU twins:
// kernels/cpu attention.cc, rope.cc, norm.cc, activation.cc (MulSigmoid).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/ragged_batch.h"

namespace sparkserve::kernels::cuda {

// One attention layer's paged cache: K and V pools bf16 [num_pages, page_size, kv_heads, head_dim].
struct KvPoolDevice {
  __nv_bfloat16* k = nullptr;
  __nv_bfloat16* v = nullptr;
  int num_pages = 0;
  int page_size = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// Per token t (position batch.positions[t], seq batch.token_seq[t]):
//   q_out[t, h, :] = rope(rmsnorm_zc(q[t, h, :], q_norm))       for h < heads
//   K[page, slot, g, :] = rope(rmsnorm_zc(k[t, g, :], k_norm)),  V[...] = v[t, g, :]   for g < kv_heads
// with page = page_table[seq][pos / page_size], slot = pos % page_size. Element i of head h of q is
// q[t * q_row_stride + h * q_head_stride + i] (q_proj interleaves q and gate per head:
// q_head_stride = 2 * head_dim); k and v heads are contiguous at k[t * k_row_stride + g * head_dim].
// rope: rotate-half on the first rot_dim dims, pairs (i, i + rot_dim/2) by pos * theta^(-2i/rot_dim).
// q_out f32 [T, heads, head_dim].
struct QkvInput {
  const float* q = nullptr;
  int q_row_stride = 0, q_head_stride = 0;
  const float* k = nullptr;
  int k_row_stride = 0;
  const float* v = nullptr;
  int v_row_stride = 0;
};
absl::Status QkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps, int heads,
                               int rot_dim, float rope_theta, const RaggedBatchDevice& batch, const KvPoolDevice& kv,
                               float* q_out, cudaStream_t stream);

// Scratch PagedAttention needs for a step of `num_tokens` tokens (split-K partials).
size_t PagedAttentionWorkspaceBytes(int num_tokens, int heads, int head_dim);

// out[t, h, :] = (softmax(scale * q[t, h] . K[0..pos]) V) * sigmoid(gate[t, h, :]) as f16: token t at
// position pos attends to positions [0, pos] of its seq (the cache already holds the step's own k/v),
// query head h reads kv head h / (heads / kv_heads). gate element i of head h at
// gate[t * gate_row_stride + h * gate_head_stride + i]. q f32 [T, heads, head_dim]; out f16
// [T, heads * head_dim]. Long contexts split over blocks (split-K) and combine; the grid does not
// depend on context lengths (graph-capturable), which are read from `batch` on the device.
absl::Status PagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                            const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                            int gate_head_stride, __half* out, void* workspace, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
