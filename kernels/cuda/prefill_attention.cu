// Flash-style causal GQA attention for prefill chunks over the paged KV cache (bf16 or fp8) on
// tensor cores: mma.sync m16n8k16 with f16 operands, f32 online softmax and accumulation, the
// sigmoid gate and f16 output as PagedAttention (attention.h) documents.
//
// A block takes one kv head g and a tile of up to BQ = kRows / group consecutive tokens of one seq
// (kRows = 16 * warps query rows, row r = token r / group, query head g * group + r % group), so
// every K/V tile it loads serves the whole GQA group. Warp w owns rows [16w, 16w + 16).
// Per tile of kKeys keys (positions kb.. of the seq, up to the tile's last query position):
//   1. the raw pool bytes (bf16 or fp8) arrive by cp.async in `raw` (issued during the previous
//      tile's math; keys past the context are zero-filled, never read);
//   2. all threads widen them to f16 into sK / sV (swizzled rows, ldmatrix without bank conflicts);
//   3. each warp: S = Q K^T (ldmatrix A from sQ, B from sK), scale (k_scale for fp8), causal mask,
//      online softmax in log2 units (q carries scale * log2 e), O += P V (P from the S registers
//      as f16 A fragments, B from sV with ldmatrix.trans). Warps whose rows all precede the tile skip
//      it; tiles wholly before a warp's first row skip the mask.
// Shared memory: sQ [kRows][HD] f16, sK, sV [kKeys][HD] f16, raw K, V [kKeys][HD] pool elements.
// Swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r & 7) (HD >= 64: >= 8 chunks a row).
// Blocks: x = tile * kv_heads + g over the tiles of all seqs with > kPerTokenMaxTokens tokens
// (each seq's tiles heaviest first: tile 0 ends at the seq's last token); the grid is sized from
// T and S only, spare blocks return at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_kv.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxGroup = 16;

struct FlashParams : AttentionCall {
  int tokens_per_tile;
  float q_scale;  // scale * log2(e)
  float k_mul;    // k_scale for fp8 (1 for bf16)
};

__device__ __forceinline__ uint32_t PackF16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Byte offset of the 16-byte chunk `c` of row `r` in a swizzled f16 tile of HD columns.
template <int HD>
__device__ __forceinline__ uint32_t SwizzledChunk(int r, int c) {
  return static_cast<uint32_t>(r * HD * 2 + ((c ^ (r & 7)) * 16));
}

// Finds this block's (seq, tokens) among the tiles of the step's long seqs; seq -1 when the block
// has no tile. Warp 0 scans the seqs 32 at a time. info: {seq, first token, token count}.
__device__ __forceinline__ void LocateTile(const FlashParams& p, int tile_id, int* info) {
  const int lane = threadIdx.x % 32;
  if (lane == 0) info[0] = -1;
  __syncwarp();
  const int bq = p.tokens_per_tile;
  int base = 0;
  for (int s0 = 0; s0 < p.batch.num_seqs; s0 += 32) {  // warp-uniform
    const int s = s0 + lane;
    int tb = 0, n = 0, nt = 0;
    if (s < p.batch.num_seqs) {
      tb = p.batch.token_begin[s];
      n = p.batch.token_begin[s + 1] - tb;
      nt = n > kPerTokenMaxTokens ? (n + bq - 1) / bq : 0;
    }
    int inc = nt;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int x = __shfl_up_sync(kFullMask, inc, off);
      if (lane >= off) inc += x;
    }
    const int first = base + inc - nt;
    if (nt > 0 && tile_id >= first && tile_id < first + nt) {
      const int k = tile_id - first;  // 0: the tile ending at the seq's last token
      const int end = n - k * bq, begin = max(0, end - bq);
      info[0] = s;
      info[1] = tb + begin;
      info[2] = end - begin;
    }
    base += __shfl_sync(kFullMask, inc, 31);
    if (base > tile_id) break;
  }
}

template <int HD, int kWarps, int kKeys, typename Kv>
__global__ void __launch_bounds__(kWarps * 32, 1) PrefillAttentionKernel(FlashParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  constexpr int kThreads = kWarps * 32;
  constexpr int kRows = kWarps * 16;
  constexpr int kChunks = HD / 8;                  // 16-byte f16 chunks a row
  constexpr int kRawRow = HD * Kv::kBytes;         // bytes of a pool row (one key, one kv head)
  constexpr int kRawChunks = kRawRow / 16;         // cp.async chunks a pool row
  constexpr int kN = kKeys / 8;                    // S n-tiles a warp
  static_assert(HD % 64 == 0 && kKeys % 16 == 0, "tile shapes");

  extern __shared__ __align__(128) uint8_t prefill_smem[];
  __shared__ int info[3];
  uint8_t* sQ = prefill_smem;                        // [kRows][HD] f16
  uint8_t* sK = sQ + kRows * HD * 2;                 // [kKeys][HD] f16
  uint8_t* sV = sK + kKeys * HD * 2;                 // [kKeys][HD] f16
  uint8_t* rawK = sV + kKeys * HD * 2;               // [kKeys][kRawRow]
  uint8_t* rawV = rawK + kKeys * kRawRow;            // [kKeys][kRawRow]

  const int g = blockIdx.x % p.kv.kv_heads;
  if (threadIdx.x < 32) LocateTile(p, blockIdx.x / p.kv.kv_heads, info);
  __syncthreads();
  const int seq = info[0];
  if (seq < 0) return;  // block-uniform
  const int t0 = info[1], nq = info[2];
  const int group = p.group;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // Q tile -> f16 (pre-scaled), padding rows zero.
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int tok = r / group;
    uint4 packed = make_uint4(0, 0, 0, 0);
    if (tok < nq) {
      const float4* src = reinterpret_cast<const float4*>(
          p.q + (static_cast<size_t>(t0 + tok) * p.heads + g * group + r % group) * HD + c * 8);
      const float4 x0 = __ldg(src), x1 = __ldg(src + 1);
      const float s = p.q_scale;
      packed = make_uint4(F32x2ToF16x2Sat(x0.x * s, x0.y * s), F32x2ToF16x2Sat(x0.z * s, x0.w * s),
                          F32x2ToF16x2Sat(x1.x * s, x1.y * s), F32x2ToF16x2Sat(x1.z * s, x1.w * s));
    }
    *reinterpret_cast<uint4*>(sQ + SwizzledChunk<HD>(r, c)) = packed;
  }

  // Query positions of this thread's two rows (lane / 4 and lane / 4 + 8 of the warp); -1: padding.
  const int row_lo = warp * 16 + lane / 4, row_hi = row_lo + 8;
  const int qp_lo = row_lo / group < nq ? p.batch.positions[t0 + row_lo / group] : -1;
  const int qp_hi = row_hi / group < nq ? p.batch.positions[t0 + row_hi / group] : -1;
  // The warp's first and last query positions (positions rise along a seq's tokens).
  const int warp_first_tok = (warp * 16) / group;
  const int warp_last_tok = min(nq - 1, (warp * 16 + 15) / group);
  const bool warp_active = warp_first_tok < nq;
  const int warp_min_qp = warp_active ? p.batch.positions[t0 + warp_first_tok] : -1;
  const int warp_max_qp = warp_active ? p.batch.positions[t0 + warp_last_tok] : -1;
  const int ctx = p.batch.positions[t0 + nq - 1] + 1;  // keys [0, ctx) serve the tile
  const int num_tiles = (ctx + kKeys - 1) / kKeys;

  const int32_t* pages = p.batch.page_table + static_cast<size_t>(seq) * p.batch.pages_stride;
  const uint8_t* pool_k = static_cast<const uint8_t*>(p.kv.k);
  const uint8_t* pool_v = static_cast<const uint8_t*>(p.kv.v);
  const uint32_t raw_k_addr = SharedAddress(rawK), raw_v_addr = SharedAddress(rawV);
  auto issue_tile = [&](int kb) {
    for (int i = threadIdx.x; i < kKeys * kRawChunks; i += kThreads) {
      const int j = i / kRawChunks, c = i % kRawChunks;
      const uint32_t dst = static_cast<uint32_t>(j * kRawRow + c * 16);
      if (kb + j < ctx) {
        const size_t off = (KvRowOffset(p.kv, pages, kb + j) + static_cast<size_t>(g) * HD) * Kv::kBytes + c * 16;
        CpAsync16(raw_k_addr + dst, pool_k + off, 16);
        CpAsync16(raw_v_addr + dst, pool_v + off, 16);
      } else {
        CpAsync16(raw_k_addr + dst, pool_k, 0);
        CpAsync16(raw_v_addr + dst, pool_v, 0);
      }
    }
    CpAsyncCommit();
  };

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // l: this thread's partial sums

  const uint32_t q_addr = SharedAddress(sQ), k_addr = SharedAddress(sK), v_addr = SharedAddress(sV);
  const int sw = lane & 7;  // every ldmatrix row below is = lane (mod 8)
  const uint32_t q_row = static_cast<uint32_t>((warp * 16 + (lane & 15)) * HD * 2);
  const uint32_t k_row = static_cast<uint32_t>(((lane >> 4) * 8 + (lane & 7)) * HD * 2);        // + jp * 16 rows
  const uint32_t v_row = static_cast<uint32_t>((((lane >> 3) & 1) * 8 + (lane & 7)) * HD * 2);   // + kk * 16 rows

  issue_tile(0);
  for (int it = 0; it < num_tiles; ++it) {  // block-uniform
    const int kb = it * kKeys;
    CpAsyncWait<0>();
    __syncthreads();  // raw tile `it` landed; every warp is done with sK/sV of tile it - 1 (and sQ is written)
    for (int i = threadIdx.x; i < kKeys * kChunks; i += kThreads) {
      const int j = i / kChunks, c = i % kChunks;
      const uint32_t dst = SwizzledChunk<HD>(j, c);
      const int src = j * kRawRow + c * 8 * Kv::kBytes;
      *reinterpret_cast<uint4*>(sK + dst) = Kv::ToF16(Kv::LoadShared8(rawK + src));
      *reinterpret_cast<uint4*>(sV + dst) = Kv::ToF16(Kv::LoadShared8(rawV + src));
    }
    __syncthreads();  // sK/sV ready; raw free
    if (it + 1 < num_tiles) issue_tile(kb + kKeys);
    if (kb > warp_max_qp) continue;  // warp-uniform: every key of the tile is after every row

    // S = Q K^T over the tile's keys.
    float s[kN][4];
#pragma unroll
    for (int n = 0; n < kN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int d = 0; d < HD / 16; ++d) {
      uint32_t a[4];
      LdMatrixX4(a, q_addr + q_row + (((2 * d + (lane >> 4)) ^ sw) * 16));
#pragma unroll
      for (int jp = 0; jp < kN / 2; ++jp) {
        uint32_t b[4];
        LdMatrixX4(b, k_addr + k_row + jp * 16 * HD * 2 + (((2 * d + ((lane >> 3) & 1)) ^ sw) * 16));
        MmaF16F32(s[2 * jp], a, b[0], b[1]);
        MmaF16F32(s[2 * jp + 1], a, b[2], b[3]);
      }
    }

    // Scale, mask, online softmax (rows lo: s[n][0..1], hi: s[n][2..3]).
    const bool masked = kb + kKeys - 1 > warp_min_qp;  // warp-uniform
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = Kv::kScaled ? s[n][e] * p.k_mul : s[n][e];
        if (masked) {
          const int key = kb + n * 8 + 2 * (lane & 3) + (e & 1);
          if (key > (e < 2 ? qp_lo : qp_hi)) x = -INFINITY;
        }
        s[n][e] = x;
      }
      mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
    }
#pragma unroll
    for (int off = 1; off <= 2; off *= 2) {
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, off));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, off));
    }
    const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
    const float base_lo = new_lo == -INFINITY ? 0.f : new_lo;  // nothing seen yet: keep everything at 0
    const float base_hi = new_hi == -INFINITY ? 0.f : new_hi;
    const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
    m_lo = new_lo;
    m_hi = new_hi;
    l_lo *= alpha_lo;
    l_hi *= alpha_hi;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      o[n][0] *= alpha_lo;
      o[n][1] *= alpha_lo;
      o[n][2] *= alpha_hi;
      o[n][3] *= alpha_hi;
    }
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      s[n][0] = exp2f(s[n][0] - base_lo);
      s[n][1] = exp2f(s[n][1] - base_lo);
      s[n][2] = exp2f(s[n][2] - base_hi);
      s[n][3] = exp2f(s[n][3] - base_hi);
      l_lo += s[n][0] + s[n][1];
      l_hi += s[n][2] + s[n][3];
    }

    // O += P V: P's A fragment for keys [16kk, 16kk + 16) is S n-tiles 2kk and 2kk + 1.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t a[4] = {PackF16x2(s[2 * kk][0], s[2 * kk][1]), PackF16x2(s[2 * kk][2], s[2 * kk][3]),
                             PackF16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             PackF16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dn = 0; dn < HD / 16; ++dn) {
        uint32_t b[4];
        LdMatrixX4Trans(b, v_addr + v_row + kk * 16 * HD * 2 + (((2 * dn + (lane >> 4)) ^ sw) * 16));
        MmaF16F32(o[2 * dn], a, b[0], b[1]);
        MmaF16F32(o[2 * dn + 1], a, b[2], b[3]);
      }
    }
  }

  // Normalise, gate, store f16.
#pragma unroll
  for (int off = 1; off <= 2; off *= 2) {
    l_lo += __shfl_xor_sync(kFullMask, l_lo, off);
    l_hi += __shfl_xor_sync(kFullMask, l_hi, off);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? row_lo : row_hi;
    const int tok = r / group;
    if (tok >= nq) continue;
    const int t = t0 + tok, h = g * group + r % group;
    const float inv = p.v_mul / (half == 0 ? l_lo : l_hi);
    const float* gate = p.gate + static_cast<size_t>(t) * p.gate_row_stride + static_cast<size_t>(h) * p.gate_head_stride;
    __half* out = p.out + (static_cast<size_t>(t) * p.heads + h) * HD;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      const int d = n * 8 + 2 * (lane & 3);
      const float y0 = o[n][2 * half] * inv / (1.0f + __expf(-gate[d]));
      const float y1 = o[n][2 * half + 1] * inv / (1.0f + __expf(-gate[d + 1]));
      *reinterpret_cast<__half2*>(out + d) = __floats2half2_rn(y0, y1);
    }
  }
}

template <int HD, int kWarps, int kKeys, typename Kv>
constexpr size_t SmemBytes() {
  return static_cast<size_t>(kWarps * 16) * HD * 2 + 2 * static_cast<size_t>(kKeys) * HD * 2 +
         2 * static_cast<size_t>(kKeys) * HD * Kv::kBytes;
}

template <int HD, int kWarps, int kKeys, typename Kv>
cudaError_t Launch(FlashParams p, cudaStream_t stream) {
  constexpr size_t kSmem = SmemBytes<HD, kWarps, kKeys, Kv>();
  auto kernel = PrefillAttentionKernel<HD, kWarps, kKeys, Kv>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(kSmem));
  if (attr != cudaSuccess) return attr;
  p.tokens_per_tile = kWarps * 16 / p.group;
  // Tiles: sum over seqs of ceil(n / bq) < ceil(T / bq) + S.
  const long long tiles = (p.batch.num_tokens + p.tokens_per_tile - 1) / p.tokens_per_tile + p.batch.num_seqs;
  const dim3 grid(static_cast<unsigned>(tiles * p.kv.kv_heads));
  return LaunchStepKernel(kernel, grid, dim3(kWarps * 32), kSmem, stream, p);
}

template <int kWarps, int kKeys, typename Kv>
cudaError_t LaunchForHeadDim(const FlashParams& p, cudaStream_t stream) {
  switch (p.kv.head_dim) {
    case 64:
      return Launch<64, kWarps, kKeys, Kv>(p, stream);
    case 128:
      return Launch<128, kWarps, kKeys, Kv>(p, stream);
    default:
      return Launch<256, kWarps, kKeys, Kv>(p, stream);
  }
}

// Large tile: 8 warps (128 rows) x 64 keys; small: 4 warps (64 rows) x 32 keys, only instantiated
// for head_dim 256 (smaller heads fit the large tile in 99 KiB).
template <typename Kv>
cudaError_t LaunchForTile(PrefillTile tile, const FlashParams& p, cudaStream_t stream) {
  if (tile == PrefillTile::kSmall) return Launch<256, 4, 32, Kv>(p, stream);
  return LaunchForHeadDim<8, 64, Kv>(p, stream);
}

}  // namespace

bool PrefillAttentionSupports(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 && group <= kMaxGroup;
}

size_t PrefillAttentionSmemBytes(PrefillTile tile, int head_dim, KvDtype dtype) {
  const size_t warps = tile == PrefillTile::kSmall ? 4 : 8, keys = tile == PrefillTile::kSmall ? 32 : 64;
  return warps * 16 * head_dim * 2 + 2 * keys * head_dim * 2 + 2 * keys * head_dim * KvDtypeBytes(dtype);
}

bool PrefillAttentionFits(PrefillTile tile, int head_dim, KvDtype dtype) {
  if (tile == PrefillTile::kSmall && head_dim != 256) return false;  // not instantiated
  return PrefillAttentionSmemBytes(tile, head_dim, dtype) + 1024 <= static_cast<size_t>(DeviceSharedMemory().per_block);  // + static smem
}

cudaError_t LaunchPrefillAttention(PrefillTile tile, const float* q, int heads, float scale, const KvPoolDevice& kv,
                                   const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                   int gate_head_stride, __half* out, cudaStream_t stream) {
  const bool fp8 = kv.dtype == KvDtype::kFp8E4M3;
  FlashParams p;
  static_cast<AttentionCall&>(p) = MakeAttentionCall(q, heads, kv, batch, gate, gate_row_stride, gate_head_stride, out);
  p.tokens_per_tile = 0;  // set per tile shape
  p.q_scale = scale * kLog2e;
  p.k_mul = fp8 ? kv.k_scale : 1.0f;
  return fp8 ? LaunchForTile<Fp8Kv>(tile, p, stream) : LaunchForTile<Bf16Kv>(tile, p, stream);
}

}  // namespace sparkserve::kernels::cuda
