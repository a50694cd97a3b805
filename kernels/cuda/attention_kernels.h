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

inline constexpr float kLog2e = 1.4426950408889634f;  // scores run in log2 units (exp2)

// What every attention kernel reads of a call (the split-K, decode and flash kernels' parameter
// structs extend it), filled once by MakeAttentionCall.
struct AttentionCall {
  const float* q;    // [T, heads, head_dim]
  int heads, group;  // group = heads / kv_heads
  float v_mul;       // v_scale for an fp8 pool, else 1
  KvPoolDevice kv;
  RaggedBatchDevice batch;
  const float* gate;
  int gate_row_stride, gate_head_stride;
  __half* out;  // [T, heads * head_dim]
};
inline AttentionCall MakeAttentionCall(const float* q, int heads, const KvPoolDevice& kv,
                                       const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                       int gate_head_stride, __half* out) {
  const bool fp8 = kv.dtype == KvDtype::kFp8E4M3;
  return AttentionCall{q,     heads, heads / kv.kv_heads, fp8 ? kv.v_scale : 1.0f, kv, batch, gate, gate_row_stride,
                       gate_head_stride, out};
}

// The split partials' places in a workspace of AttentionPartialFloats: all null for one split.
struct SplitPartials {
  float* acc = nullptr;  // [splits, T, heads, head_dim]
  float* m = nullptr;    // [splits, T, heads]
  float* l = nullptr;    // [splits, T, heads]
};
inline SplitPartials CarveSplitPartials(float* workspace, int splits, int num_tokens, int heads, int head_dim) {
  if (splits <= 1) return {};
  const size_t stat_floats = static_cast<size_t>(splits) * num_tokens * heads;
  const size_t acc_floats = stat_floats * head_dim;
  return {workspace, workspace + acc_floats, workspace + acc_floats + stat_floats};
}

cudaError_t LaunchQkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps,
                                    int heads, int rot_dim, float rope_theta, const RaggedBatchDevice& batch,
                                    const KvPoolDevice& kv, float* q_out, cudaStream_t stream);

// Seqs with at most this many tokens in a step take the split-K kernel's per-token path; longer
// ones its tile path or the flash prefill kernel.
inline constexpr int kPerTokenMaxTokens = 4;

// Which seqs the split-K kernel takes: the others are written by the flash prefill kernel (long
// seqs) or the tensor-core decode kernel (short seqs).
enum class SplitKSeqs : int {
  kAll = 0,
  kShortOnly = 1,  // seqs with <= kPerTokenMaxTokens tokens
  kLongOnly = 2,   // seqs with more
};

// The split-K kernel (and its combine) over the tokens of the seqs `seqs` names.
cudaError_t LaunchPagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                 const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                 int gate_head_stride, __half* out, float* workspace, SplitKSeqs seqs,
                                 cudaStream_t stream);

// The tensor-core decode kernel (attention_decode.cu) over the seqs with <= kPerTokenMaxTokens
// tokens: a 1-warp block per (seq, column tile of 8 (token, query head) pairs, kv head, split).
// Head dims 64 / 128 / 256, any GQA group, bf16 or fp8 pools.
bool DecodeAttentionSupports(int head_dim);
// Blocks a SM the split count aims for (4 one-warp blocks of ~50 KiB shared memory fill an H200 SM).
inline constexpr int kDecodeBlocksPerSm = 4;
// Column tiles a short seq needs: ceil(min(max_seq_tokens, kPerTokenMaxTokens) * group / 8).
int DecodeAttentionColumnTiles(int max_seq_tokens, int group);
// Most splits a step of num_tokens tokens may take: kDecodeBlocksPerSm * SMs / num_tokens (>= 1),
// so the partials need at most that many SMs' worth of rows whatever the batch.
int DecodeAttentionSplitCap(int num_tokens);
// Splits of each (seq, column tile, kv head): kDecodeBlocksPerSm * SMs / (seqs x kv heads x tiles),
// at least 1, at most DecodeAttentionSplitCap(num_tokens). Host-known sizes only (graph-safe).
int DecodeAttentionSplits(int num_seqs, int num_tokens, int max_seq_tokens, int kv_heads, int group);
// Dynamic shared memory of a decode block (bytes); 0 for an unsupported head_dim.
size_t DecodeAttentionSmemBytes(int head_dim, KvDtype dtype);
// With DecodeAttentionSplits(...) > 1, `workspace` holds AttentionPartialFloats(splits, T, heads,
// head_dim) floats (16-byte aligned).
cudaError_t LaunchDecodeAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                  const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                  int gate_head_stride, __half* out, float* workspace, cudaStream_t stream);

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
