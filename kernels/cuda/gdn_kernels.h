// Internal to kernels/cuda: the Gated DeltaNet launchers (gdn.cu) and the limits their kernels are
// built for, shared with the argument checks in gdn.cc. No fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <optional>

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

// GatedDeltaNetChunked (gdn_chunked*.cu): 64-token chunks; dk <= 128 (the prepared chunk and the
// recurrence's state slice fit shared memory); the recurrence owns 32 value columns a block.
inline constexpr int kGdnChunkTokens = 64;
inline constexpr int kGdnChunkSliceColumns = 32;
inline constexpr int kGdnChunkedMaxDk = 128;
// GatedDeltaNet's automatic choice: a seq of at least this many tokens goes to the chunked kernels
// (the rest of the step to the sequential one). The sequential kernel pays one block-wide reduction
// and one cluster barrier per token (~1 us a token at the 4B's shape); a chunk of the chunked path
// costs about as much as a few such tokens whatever its length, so past ~16 tokens it wins. Decode
// (1 token a seq, graph-captured) never reaches it.
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
  void* state;      // [num_slots, nv, dk, dv]: f32, or bf16 when state_bf16 (gdn_math.cuh loads / stores it)
  bool state_bf16;
  __half* out;
};
GdnLayerParams MakeGdnLayerParams(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                  const float* norm_w, float eps, const RaggedBatchDevice& batch, GdnStateRef state,
                                  __half* out);

cudaError_t LaunchCausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                                   const RaggedBatchDevice& batch, float* window, float* column_window,
                                   int max_columns, float* out, cudaStream_t stream);

// The sequential kernel skips (leaves to the chunked one) every seq of at least skip_from_tokens
// tokens; INT_MAX: it takes every seq.
cudaError_t LaunchGatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                const float* norm_w, float eps, const RaggedBatchDevice& batch, int skip_from_tokens,
                                GdnStateRef state, float* column_state, int max_columns, __half* out,
                                cudaStream_t stream);

// ---- The chunked path (gdn_chunked_prep.cu, gdn_chunked.cu; gdn.h has the algebra) ----
// One prepared chunk (a "record") of one value head in the workspace, byte offsets (all multiples
// of 16; row strides padded so the recurrence's mma fragment reads are free of bank conflicts):
//   W   f32 [64][ldw]   T diag(beta gamma) K          ldw = dkp + 4
//   KT  f32 [dkp][68]   (diag(exp(G_last - G)) K)^T   (the decayed keys, transposed)
//   Q   f16 [64][ldq]   diag(gamma) Q                  ldq = dkp + 8
//   P   f16 [64][72]    lower(exp(G_t - G_s) q_t.k_s)
//   decay f32 [4]       exp(G_last), 0, 0, 0
//   U   f32 [64][dvp]   T diag(beta) V
// dkp = dk rounded up to 16, dvp = dv rounded up to 32; rows past the chunk's tokens and columns
// past dk / dv are zeros. Both recurrence variants (below) read the same records.
struct GdnChunkLayout {
  int dkp = 0, dvp = 0, ldw = 0, ldq = 0;
  int w_off = 0, kt_off = 0, q_off = 0, p_off = 0, decay_off = 0, u_off = 0, bytes = 0;
};
constexpr GdnChunkLayout MakeGdnChunkLayout(int dk, int dv) {
  GdnChunkLayout l;
  l.dkp = (dk + 15) / 16 * 16;
  l.dvp = (dv + kGdnChunkSliceColumns - 1) / kGdnChunkSliceColumns * kGdnChunkSliceColumns;
  l.ldw = l.dkp + 4;
  l.ldq = l.dkp + 8;
  l.w_off = 0;
  l.kt_off = l.w_off + kGdnChunkTokens * l.ldw * 4;
  l.q_off = l.kt_off + l.dkp * 68 * 4;
  l.p_off = l.q_off + kGdnChunkTokens * l.ldq * 2;
  l.decay_off = l.p_off + kGdnChunkTokens * 72 * 2;
  l.u_off = l.decay_off + 16;
  l.bytes = l.u_off + kGdnChunkTokens * l.dvp * 4;
  return l;
}
// Chunk slots of a step of `tokens` tokens over `seqs` seqs: seq s's chunks take slots
// (token_begin[s] - token_begin[0]) / 64 + s onwards, which never overlap and stay below this.
inline int GdnChunkSlots(int tokens, int seqs) { return tokens / kGdnChunkTokens + seqs; }
// The workspace of such a step: the records [slots][nv], then (at a 256-byte boundary) the
// pre-norm output O f32 [tokens][nv][dv]. The same for both variants.
inline size_t GdnChunkRecordsBytes(const GdnShape& shape, int tokens, int seqs) {
  const size_t records = static_cast<size_t>(GdnChunkSlots(tokens, seqs)) * static_cast<size_t>(shape.nv) *
                         static_cast<size_t>(MakeGdnChunkLayout(shape.dk, shape.dv).bytes);
  return (records + 255) / 256 * 256;
}
inline size_t GdnChunkWorkspaceBytes(const GdnShape& shape, int tokens, int seqs) {
  return GdnChunkRecordsBytes(shape, tokens, seqs) +
         static_cast<size_t>(tokens) * static_cast<size_t>(shape.nv) * static_cast<size_t>(shape.dv) * 4;
}

// How the recurrence kernel stages a chunk's record in shared memory (gdn_chunked.cu). Both run the
// same arithmetic in the same order (bit-identical results); they differ only in the pieces they copy:
//   kLarge: W + Q whole, then KT + P whole, in a ring of 3 such pieces (two in flight): 180 KB a
//           block at dk = 128; needs sm_90 / sm_100's 227 KB.
//   kSmall: 32 columns of W + Q, then 16 tokens of KT + P, in a ring of 4 (three in flight): 86 KB
//           at dk = 128, inside the 99 KB of sm_120 / sm_121 (DGX Spark, RTX Blackwell).
// The prep kernel (90560 bytes, 88 KB, at dk = 128) is the same for both.
enum class GdnChunkedVariant { kLarge, kSmall };
inline constexpr int kGdnSmallSharedMemory = 101376;  // sm_120 / sm_121: 99 KB a block, opted into
// Staging of a variant: W / Q columns a b-piece (0: all dkp), KT / P tokens a d-piece, ring depth.
struct GdnChunkStaging {
  int piece_k, piece_t, ring;
};
inline constexpr GdnChunkStaging kGdnLargeStaging{0, kGdnChunkTokens, 3};
inline constexpr GdnChunkStaging kGdnSmallStaging{32, 16, 4};
constexpr GdnChunkStaging GdnStagingOf(GdnChunkedVariant v) {
  return v == GdnChunkedVariant::kLarge ? kGdnLargeStaging : kGdnSmallStaging;
}
// Bytes of one ring buffer: the larger of a b-piece (W [64][kb + 4] f32, Q [64][kb + 8] f16) and a
// d-piece (KT [dkp][tb + 4] f32, P [64][tb + 8] f16); every part a multiple of 16 bytes.
constexpr int GdnPieceK(const GdnChunkLayout& lay, const GdnChunkStaging& st) {
  return st.piece_k == 0 ? lay.dkp : st.piece_k;
}
constexpr size_t GdnPieceBytes(const GdnChunkLayout& lay, const GdnChunkStaging& st) {
  const size_t kb = static_cast<size_t>(GdnPieceK(lay, st)), tb = static_cast<size_t>(st.piece_t);
  const size_t b = kGdnChunkTokens * (kb + 4) * 4 + kGdnChunkTokens * (kb + 8) * 2;
  const size_t d = static_cast<size_t>(lay.dkp) * (tb + 4) * 4 + kGdnChunkTokens * (tb + 8) * 2;
  return b > d ? b : d;
}
// The recurrence: the ring, the state slice S [dkp][32 + 8] and delta [64][32 + 8] (f32).
constexpr size_t GdnRecurrenceSmemBytes(const GdnChunkLayout& lay, const GdnChunkStaging& st) {
  return static_cast<size_t>(st.ring) * GdnPieceBytes(lay, st) +
         4 * static_cast<size_t>(lay.dkp + kGdnChunkTokens) * (kGdnChunkSliceColumns + 8);
}
// The prep kernel (gdn_chunked_prep.cu): q (later v) and k rows, A (T in place), the inverse's
// block sums, the gates.
constexpr size_t GdnPrepSmemBytes(const GdnChunkLayout& lay) {
  const int ldk = lay.dkp + 4, ldv = lay.dvp + 8;
  const int floats = kGdnChunkTokens * (ldk > ldv ? ldk : ldv) + kGdnChunkTokens * ldk +
                     kGdnChunkTokens * (kGdnChunkTokens + 4) + 3 * 16 * 17 + 5 * kGdnChunkTokens;
  return 4 * static_cast<size_t>(floats);
}
constexpr size_t GdnChunkedSmemBytesOf(const GdnChunkLayout& lay, GdnChunkedVariant v) {
  const size_t rec = GdnRecurrenceSmemBytes(lay, GdnStagingOf(v)), prep = GdnPrepSmemBytes(lay);
  return rec > prep ? rec : prep;
}
// The small variant fits sm_120 / sm_121 for every dk, dv the chunked path takes (the sizes grow
// with dk and dv): 90560 bytes (the prep) at dk = dv = 128.
static_assert(GdnChunkedSmemBytesOf(MakeGdnChunkLayout(kGdnChunkedMaxDk, kGdnMaxDv), GdnChunkedVariant::kSmall) <=
              kGdnSmallSharedMemory);
static_assert(GdnRecurrenceSmemBytes(MakeGdnChunkLayout(128, 128), kGdnSmallStaging) == 88064);
static_assert(GdnRecurrenceSmemBytes(MakeGdnChunkLayout(128, 128), kGdnLargeStaging) == 184320);
static_assert(GdnPrepSmemBytes(MakeGdnChunkLayout(128, 128)) == 90560);

// Dynamic shared memory the chunked kernels need with `variant` (the larger of prep and recurrence),
// whether the current device grants it, and what kAuto / kChunked run: kLarge where it fits (sm_90,
// sm_100), else kSmall where it fits (sm_120, sm_121); nullopt: neither (dk > 128).
size_t GdnChunkedSmemBytes(int dk, int dv, GdnChunkedVariant variant);
bool GdnChunkedFitsDevice(int dk, int dv, GdnChunkedVariant variant);
std::optional<GdnChunkedVariant> GdnChunkedVariantFor(int dk, int dv);

// The chunked kernels take every seq of at least min_tokens (>= 1) tokens and leave the others
// untouched. exact: every mma emulated with f32 FMAs (kChunkedSimt); else TF32 tensor cores
// (3xTF32 on the state path). Needs dk <= kGdnChunkedMaxDk, dv <= kGdnMaxDv, no column states, a
// variant that fits the device, and a 16-byte aligned workspace of GdnChunkWorkspaceBytes(shape,
// batch.num_tokens, batch.num_seqs).
cudaError_t LaunchGatedDeltaNetChunked(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                       const float* dt_bias, const float* norm_w, float eps,
                                       const RaggedBatchDevice& batch, int min_tokens, GdnChunkedVariant variant,
                                       bool exact, GdnStateRef state, __half* out, void* workspace,
                                       size_t workspace_bytes, cudaStream_t stream);

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
                                      const RaggedBatchDevice& batch, GdnDecodeLayout layout, GdnStateRef state,
                                      __half* out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
