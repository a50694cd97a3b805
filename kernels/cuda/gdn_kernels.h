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

// GatedDeltaNetChunked (gdn_chunked.cu): 64-token chunks, 32 value columns a block (clusters of up to
// kGdnMaxSlices blocks a head), q/k chunks and the state slice in shared memory: dk <= 128.
inline constexpr int kGdnChunkTokens = 64;
inline constexpr int kGdnChunkSliceColumns = 32;
inline constexpr int kGdnChunkedMaxDk = 128;
// GatedDeltaNet's automatic choice: a seq of at least this many tokens goes to the chunked kernel
// (the rest of the step to the sequential one). The sequential kernel pays one block-wide reduction
// and one cluster barrier per token (~1 us a token at the 4B's shape: 5.5 us for a decode step
// including the launch); a chunk of the chunked kernel costs about as much as a few such tokens
// whatever its length, so past ~16 tokens it wins (measured on the H200 at the 4B's shape: 1.4x at
// 512 tokens, 1.2x at 4096; gpu_kernel_check prints both). Decode (1 token a seq, graph-captured)
// never reaches it.
inline constexpr int kGdnChunkedMinTokens = 16;

// What both GDN kernels read of a layer and a step (their parameter structs extend it).
struct GdnLayerParams {
  const float* mixed;
  int mixed_stride;
  const float* a;
  const float* b;
  int ab_stride;
  const float* z;
  int z_stride;
  int nk, nv, dk, dv;
  const float* a_log;
  const float* dt_bias;
  const float* norm_w;
  float eps;
  float q_scale;  // dk^-0.5, as the CPU model
  RaggedBatchDevice batch;
  float* state;
  __half* out;
};
GdnLayerParams MakeGdnLayerParams(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                  const float* norm_w, float eps, const RaggedBatchDevice& batch, float* state,
                                  __half* out);

cudaError_t LaunchCausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                                   const RaggedBatchDevice& batch, float* window, float* column_window,
                                   int max_columns, float* out, cudaStream_t stream);

// The sequential kernel skips (leaves to the chunked one) every seq of at least skip_from_tokens
// tokens; INT_MAX: it takes every seq.
cudaError_t LaunchGatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                const float* norm_w, float eps, const RaggedBatchDevice& batch, int skip_from_tokens,
                                float* state, float* column_state, int max_columns, __half* out, cudaStream_t stream);

// The chunked kernel takes every seq of at least min_tokens (>= 1) tokens and leaves the others
// untouched. tensor_cores: TF32 mma tiles (3xTF32 on the state path); false: f32 FMA tiles.
// Needs dk <= kGdnChunkedMaxDk, dv <= kGdnChunkSliceColumns * kGdnMaxSlices; no column states.
cudaError_t LaunchGatedDeltaNetChunked(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                       const float* dt_bias, const float* norm_w, float eps,
                                       const RaggedBatchDevice& batch, int min_tokens, bool tensor_cores, float* state,
                                       __half* out, cudaStream_t stream);

// GatedDeltaNetDecode (gdn_decode.cu): seqs of exactly 1 token (others are left untouched), one read
// and one write of the state. Whole-head blocks (dk <= kGdnDecodeWholeHeadMaxDk) when num_seqs * nv
// fills the SMs, else blocks of kGdnDecodeSplitColumns columns in clusters of ceil(dv / 32) a head.
inline constexpr int kGdnDecodeSplitColumns = 32;
inline constexpr int kGdnDecodeMaxSlices = 4;
inline constexpr int kGdnDecodeWholeHeadMaxDk = 128;
enum class GdnDecodeLayout { kAuto, kWholeHead, kSplitColumns };  // tests force each
bool GdnDecodeUsesWholeHeads(const GdnShape& shape, int num_seqs);  // what kAuto picks
cudaError_t LaunchGatedDeltaNetDecode(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                      const float* dt_bias, const float* norm_w, float eps,
                                      const RaggedBatchDevice& batch, GdnDecodeLayout layout, float* state,
                                      __half* out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
