// Internal to attention_decode.cu / attention_decode_combine.cu: the tensor-core decode kernel's
// parameters, and the split arithmetic the attention kernel and the split combine must agree on.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/ragged_batch.h"

namespace sparkserve::kernels::cuda::decode_attention {

inline constexpr int kTileKeys = 16;  // keys a pipeline stage: the M of S^T
inline constexpr int kCols = 8;       // query columns a block: the N of both mma

struct DecodeParams : AttentionCall {
  int col_tiles, num_splits;
  float qk_scale;  // scale * log2(e) (* k_scale for fp8): raw mma scores -> log2 units
  SplitPartials ws;
};

// Keys a split takes of a context of ctx keys (split s: [s * chunk, min(ctx, (s + 1) * chunk))):
// whole tiles, so no split starts mid-tile; splits at or past ctx are empty.
__device__ __forceinline__ int SplitChunk(int ctx, int num_splits) {
  const int per = (ctx + num_splits - 1) / num_splits;
  return (per + kTileKeys - 1) / kTileKeys * kTileKeys;
}

// The keys (context) a column tile of a short seq attends to: up to its last token's position.
__device__ __forceinline__ int ColumnTileContext(const RaggedBatchDevice& b, int tb, int ncols, int col0, int group) {
  const int last = min(col0 + kCols - 1, ncols - 1);
  return b.positions[tb + last / group] + 1;
}

// Launches DecodeCombineKernel over (T, heads) for p.num_splits > 1 (attention_decode_combine.cu).
cudaError_t LaunchDecodeCombine(const DecodeParams& p, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda::decode_attention
