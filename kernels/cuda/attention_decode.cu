// Paged attention for the seqs of <= kPerTokenMaxTokens tokens a step (decode, MTP verify) on
// tensor cores: one warp a block streams one split of one seq's K/V for one kv head through a
// cp.async ring in shared memory, and the whole GQA group (every query head of the kv head, every
// token of the seq: up to 8 "columns") rides on each mma, so each K/V byte is read once a step.
//
// Per 16-key tile (keys kb .. kb + 15 of the split; keys past it are zero-filled, never read):
//   S^T [16 keys x 8 cols] = K [16 x HD] . Q^T          (mma m16n8k16: M = keys, N = columns)
//   scale to log2 units, causal mask per column, online softmax per column (max over the keys by
//   3 xor shuffles), P^T through a small shared tile into B-fragment layout, then
//   O^T [HD x 8] += V^T [HD x 16 keys] . P^T             (M = dims, N = columns)
// Precision: bf16 pools run bf16 mma, fp8 pools f16 mma on the exact e4m3 -> f16 codes; q and p
// enter as hi + lo pairs of the mma type (two mma each), so the products carry ~16 (bf16) / ~22
// (f16) bits and accumulate in f32: the results match the f32 split-K kernel's tolerance.
// Operand layout: bf16 K/V tiles are read with ldmatrix (K as A, V with .trans as A of V^T). fp8
// tiles with plain shared loads, in an order the mma does not care about: the dims of a k-step
// (and of Q with them), the keys of a PV k-step (and of P with them) and the dims of an O^T
// m-tile are permuted so that a lane's bytes are contiguous (see QDim / OutDim / PSlot).
// Splits: host-chosen from num_seqs x kv_heads x column tiles vs the SM count (never from the
// device's context lengths): with one split the block normalises, gates and writes f16 itself;
// with more, each writes (acc, m, l) for its columns and DecodeCombineKernel merges them. Empty
// splits (past a short context) write nothing; the combine counts the non-empty ones itself.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_kv.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

using decode_attention::ColumnTileContext;
using decode_attention::DecodeParams;
using decode_attention::kCols;
using decode_attention::kTileKeys;
using decode_attention::SplitChunk;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kPStride = 20;  // floats a row of the P^T transpose tile (conflict-free writes)

// ---- shared-memory loads and stores at a shared address (cp.async, ldmatrix, mma: ptx.cuh) ----

__device__ __forceinline__ uint4 Lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint2 Lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ void Sts64(uint32_t addr, uint32_t x, uint32_t y) {
  asm volatile("st.shared.v2.u32 [%0], {%1,%2};\n" ::"r"(addr), "r"(x), "r"(y) : "memory");
}
__device__ __forceinline__ uint32_t Lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// c += A (16x16, row) * B (16x8, col), f32 accumulate; bf16 or f16 operands.
template <bool kBf16>
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kBf16) {
    MmaBf16F32(c, a, b0, b1);
  } else {
    MmaF16F32(c, a, b0, b1);
  }
}

// (x0, x1) as a hi pair of the mma type (round to nearest) and the lo pair of what hi misses, so
// that hi + lo carries x to ~16 (bf16) / ~22 (f16) bits. x0 goes to the low half.
template <bool kBf16>
__device__ __forceinline__ void SplitPair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  if constexpr (kBf16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - __low2float(h), x1 - __high2float(h));
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  } else {
    const __half2 h = __floats2half2_rn(x0, x1);
    const __half2 l = __floats2half2_rn(x0 - __low2float(h), x1 - __high2float(h));
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
  }
}

// ---- Tile geometry ----------------------------------------------------------------------------

template <typename Kv, int HD>
struct DecodeGeometry {
  static constexpr bool kBf16 = Kv::kDtype == KvDtype::kBf16;
  static constexpr int kRowBytes = HD * Kv::kBytes;  // one key of one kv head in the pool
  // Shared row strides (bytes), chosen for conflict-free fragment reads: bf16 rows are read by
  // ldmatrix (8 rows of 16 B: stride = 16 mod 128 hits 8 different bank groups); fp8 K rows by
  // 16-byte loads of rows g and g + 1 in one phase (stride = 64 mod 128), fp8 V rows by 4-byte
  // loads of rows t, t + 4, t + 8, t + 12 (stride = 32 mod 128: 4 different 8-bank groups).
  static constexpr int kKStride = kBf16 ? kRowBytes + 16 : (HD % 128 == 64 ? HD : HD + 64);
  static constexpr int kVStride = kBf16 ? kRowBytes + 16 : HD + 32;
  static constexpr int kStageBytes = kTileKeys * (kKStride + kVStride);
  static constexpr int kStages = std::clamp(52000 / kStageBytes, 2, 8);
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kOutStride = HD + 4;  // floats a column of the final O tile
  static constexpr int kOutBytes = kCols * kOutStride * 4;
  static constexpr int kPBytes = kCols * kPStride * 4;
  static constexpr int kQLoBytes = HD / 16 * 32 * 8;  // q lo fragments: [k-step][lane] 8 bytes
  // Layout: ring (reused for the final O tile), P^T tile, m / l of the columns, q lo fragments.
  static constexpr int kPOffset = kRingBytes > kOutBytes ? kRingBytes : kOutBytes;
  static constexpr int kQLoOffset = kPOffset + kPBytes + 2 * kCols * 4;
  static constexpr int kSmemBytes = kQLoOffset + kQLoBytes;
  static constexpr int kChunksPerRow = kRowBytes / 16;                   // cp.async pieces of a pool row
  static constexpr int kChunksPerLane = kTileKeys * kChunksPerRow / 32;  // per tensor per tile
  static_assert(HD == 64 || HD == 128 || HD == 256, "decode attention head dims");
  static_assert(kChunksPerLane >= 1 && kKStride % 16 == 0 && kVStride % 16 == 0, "tile shapes");
};

// Real dim of the pair a lane holds at k-step s of S^T (half 0: B rows 2t, 2t+1; half 1: rows
// 2t+8, 2t+9; pairs are 2 consecutive dims). bf16: the ldmatrix order (identity). fp8: lane t's
// four elements of k-step 4j+u are dims 64j + 16t + 4u + {0..3}, so a 16-byte load of a K row
// serves 4 k-steps.
template <bool kBf16>
__device__ __forceinline__ int QDim(int s, int t, int half) {
  if constexpr (kBf16) return 16 * s + 2 * t + 8 * half;
  return 64 * (s / 4) + 16 * t + 4 * (s % 4) + 2 * half;
}

// Real dim of O^T row `r` (0..15) of m-tile m. bf16: identity. fp8: m-tiles come in pairs over 32
// dims; tile 2p + w, row g + 8h is dim 32p + 4g + 2w + h (a lane's 4 rows are 4 consecutive dims).
template <bool kBf16>
__device__ __forceinline__ int OutDim(int m, int r) {
  if constexpr (kBf16) return 16 * m + r;
  return 32 * (m / 2) + 4 * (r % 8) + 2 * (m % 2) + r / 8;
}

// Slot of key r (0..15 of the tile) in the PV k order. bf16: identity. fp8: B rows 2t, 2t+1, 2t+8,
// 2t+9 of lane t are keys t, t+4, t+8, t+12 (rows t + 4i of the V tile, conflict-free).
template <bool kBf16>
__device__ __forceinline__ int PSlot(int r) {
  if constexpr (kBf16) return r;
  return 8 * (r / 8) + 2 * (r % 4) + (r / 4) % 2;
}

// ---- The attention kernel ---------------------------------------------------------------------

// grid (num_seqs * col_tiles, kv_heads, splits), 32 threads. Block: seq x / col_tiles, columns
// [8c, 8c + 8) of its (token, query head) pairs (column = token * group + head in group), kv head y,
// split z. Seqs with > kPerTokenMaxTokens tokens are left to the prefill / split-K kernels.
template <typename Kv, int HD>
__global__ void __launch_bounds__(32) DecodeAttentionKernel(DecodeParams p) {
  using Geo = DecodeGeometry<Kv, HD>;
  constexpr bool kBf16 = Geo::kBf16;
  constexpr int kSteps = HD / 16;  // k-steps of S^T, m-tiles of O^T
  constexpr int kStages = Geo::kStages;
  extern __shared__ __align__(128) uint8_t decode_smem[];
  float* p_tile = reinterpret_cast<float*>(decode_smem + Geo::kPOffset);  // [8][kPStride]
  float* ml = p_tile + kCols * kPStride;                                  // m [8], l [8]

  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const int seq = blockIdx.x / p.col_tiles, col0 = (blockIdx.x % p.col_tiles) * kCols;
  const int kvh = blockIdx.y, split = blockIdx.z;
  // Step metadata is host-written before the step (no kernel writes it), so it is read before
  // WaitForPriorGrids: the previous kernel has passed its own wait when this one starts.
  const RaggedBatchDevice& bt = p.batch;
  const int tb = bt.token_begin[seq], n = bt.token_begin[seq + 1] - tb;
  if (n > kPerTokenMaxTokens) return;  // block-uniform
  const int group = p.group, ncols = n * group;
  if (col0 >= ncols) return;
  const int ctx = ColumnTileContext(bt, tb, ncols, col0, group);
  const int chunk = SplitChunk(ctx, p.num_splits);
  const int a = split * chunk, b = min(ctx, a + chunk);
  if (a >= b) return;  // an empty split: the combine skips it
  const int n_tiles = (b - a + kTileKeys - 1) / kTileKeys;
  // Positions of this lane's two S^T columns 2t, 2t + 1 (-1: padding, every key masked).
  const int c_lo = col0 + 2 * t, c_hi = c_lo + 1;
  const int pos_lo = c_lo < ncols ? bt.positions[tb + c_lo / group] : -1;
  const int pos_hi = c_hi < ncols ? bt.positions[tb + c_hi / group] : -1;

  const int32_t* pages = bt.page_table + static_cast<size_t>(seq) * bt.pages_stride;
  const int page_size = p.kv.page_size;
  // Pool row (page * page_size + slot) of key kb + lane for lanes < 16; -1 past the split.
  auto row_of = [&](int kb) {
    const int key = kb + lane;
    if (lane >= kTileKeys || key >= b) return -1;
    return __ldg(pages + key / page_size) * page_size + key % page_size;
  };
  int first_rows[kStages - 1];
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) first_rows[j] = j < n_tiles ? row_of(a + j * kTileKeys) : -1;

  WaitForPriorGrids();
  AllowNextGrid();

  const uint8_t* pool_k = static_cast<const uint8_t*>(p.kv.k);
  const uint8_t* pool_v = static_cast<const uint8_t*>(p.kv.v);
  const size_t pool_row_bytes = static_cast<size_t>(p.kv.kv_heads) * Geo::kRowBytes;
  const size_t head_bytes = static_cast<size_t>(kvh) * Geo::kRowBytes;
  const uint32_t ring = SharedAddress(decode_smem);
  // Copies the tile whose pool rows lanes 0..15 hold (my_row) into ring stage `dst_stage`.
  auto issue = [&](int my_row, int dst_stage) {
    const uint32_t sk = ring + dst_stage * Geo::kStageBytes, sv = sk + kTileKeys * Geo::kKStride;
#pragma unroll
    for (int i = 0; i < Geo::kChunksPerLane; ++i) {
      const int x = lane + 32 * i, r = x / Geo::kChunksPerRow, c = x % Geo::kChunksPerRow;
      const int row = __shfl_sync(kFullMask, my_row, r);
      const uint32_t dk = sk + r * Geo::kKStride + c * 16, dv = sv + r * Geo::kVStride + c * 16;
      if (row >= 0) {
        const size_t off = static_cast<size_t>(row) * pool_row_bytes + head_bytes + c * 16;
        CpAsync16(dk, pool_k + off, 16);
        CpAsync16(dv, pool_v + off, 16);
      } else {
        CpAsync16(dk, pool_k, 0);
        CpAsync16(dv, pool_v, 0);
      }
    }
    CpAsyncCommit();
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < n_tiles) {
      issue(first_rows[j], j);
    } else {
      CpAsyncCommit();  // empty group: the wait count below stays uniform
    }
  }

  // Q^T B fragments (column g of the tile; loaded while the first tiles are in flight), unscaled
  // (the scale is applied to S in f32): hi in registers, lo in this lane's own shared slots (read
  // back by this lane only: no barrier).
  uint32_t qh[kSteps][2];
  const uint32_t q_lo = SharedAddress(decode_smem + Geo::kQLoOffset) + lane * 8;  // + k-step * 256
  {
    const int col = col0 + g;
    const float* qrow = nullptr;
    if (col < ncols) {
      qrow = p.q + (static_cast<size_t>(tb + col / group) * p.heads + kvh * group + col % group) * HD;
    }
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      uint32_t lo[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float2 x = make_float2(0.f, 0.f);
        if (qrow != nullptr) x = *reinterpret_cast<const float2*>(qrow + QDim<kBf16>(s, t, half));
        SplitPair<kBf16>(x.x, x.y, qh[s][half], lo[half]);
      }
      Sts64(q_lo + s * 256, lo[0], lo[1]);
    }
  }

  float acc[kSteps][4];
#pragma unroll
  for (int m = 0; m < kSteps; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // l: this lane's keys only

  // ldmatrix lane offsets. K (A of S^T): matrices (rows 0-7 | 8-15) x (dims +0 | +8) in a0..a3
  // order; V (A of O^T via .trans): (keys 0-7 | 8-15) x (dims +0 | +8) as (d, k) blocks.
  const uint32_t k_lane = (lane % 8 + ((lane / 8) % 2) * 8) * Geo::kKStride + (lane / 16) * 16;
  const uint32_t v_lane = (lane % 8 + (lane / 16) * 8) * Geo::kVStride + ((lane / 8) % 2) * 16;

  int stage = 0, issue_stage = kStages - 1;
  for (int i = 0; i < n_tiles; ++i) {  // warp-uniform
    __syncwarp();                      // every lane is done with tile i - 1's stage, which the next copy refills
    if (i + kStages - 1 < n_tiles) {
      issue(row_of(a + (i + kStages - 1) * kTileKeys), issue_stage);
    } else {
      CpAsyncCommit();
    }
    issue_stage = issue_stage + 1 == kStages ? 0 : issue_stage + 1;
    CpAsyncWait<kStages - 1>();  // this lane's copies of tile i have landed
    __syncwarp();                // ... and every other lane's
    const uint32_t sk = ring + stage * Geo::kStageBytes, sv = sk + kTileKeys * Geo::kKStride;
    stage = stage + 1 == kStages ? 0 : stage + 1;
    const int kb = a + i * kTileKeys;

    // S^T = K Q^T into independent accumulators (q hi / q lo; fp8 also even / odd k-steps, as
    // its register budget allows) so the mma chains stay short.
    constexpr int kAccs = kBf16 ? 2 : 4;
    float s2[kAccs][4];
#pragma unroll
    for (int u = 0; u < kAccs; ++u) s2[u][0] = s2[u][1] = s2[u][2] = s2[u][3] = 0.f;
    if constexpr (kBf16) {
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        uint32_t ka[4];
        LdMatrixX4(ka, sk + k_lane + s * 32);
        const uint2 ql = Lds64(q_lo + s * 256);
        Mma<true>(s2[0], ka, qh[s][0], qh[s][1]);
        Mma<true>(s2[1], ka, ql.x, ql.y);
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < HD / 64; ++jj) {
        const uint4 w_lo = Lds128(sk + g * Geo::kKStride + 64 * jj + 16 * t);
        const uint4 w_hi = Lds128(sk + (g + 8) * Geo::kKStride + 64 * jj + 16 * t);
        const uint32_t wl[4] = {w_lo.x, w_lo.y, w_lo.z, w_lo.w}, wh[4] = {w_hi.x, w_hi.y, w_hi.z, w_hi.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int s = 4 * jj + u;
          const uint32_t ka[4] = {Fp8Kv::PairToF16x2(wl[u] & 0xffffu), Fp8Kv::PairToF16x2(wh[u] & 0xffffu),
                                  Fp8Kv::PairToF16x2(wl[u] >> 16), Fp8Kv::PairToF16x2(wh[u] >> 16)};
          const uint2 ql = Lds64(q_lo + s * 256);
          Mma<false>(s2[(s % (kAccs / 2)) * 2], ka, qh[s][0], qh[s][1]);
          Mma<false>(s2[(s % (kAccs / 2)) * 2 + 1], ka, ql.x, ql.y);
        }
      }
    }

    // Scale, mask, online softmax. Element e: key g + 8 (e / 2), column 2t + (e % 2).
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = kb + g + 8 * (e / 2);
      const int pos = e % 2 == 0 ? pos_lo : pos_hi;
      float sc = 0.f;
#pragma unroll
      for (int u = 0; u < kAccs; ++u) sc += s2[u][e];
      x[e] = key < b && key <= pos ? sc * p.qk_scale : -INFINITY;
    }
    float mx_lo = fmaxf(x[0], x[2]), mx_hi = fmaxf(x[1], x[3]);
#pragma unroll
    for (int off = 4; off < 32; off *= 2) {  // over g: the 16 keys of each column
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(kFullMask, mx_lo, off));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(kFullMask, mx_hi, off));
    }
    const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
    const float base_lo = new_lo == -INFINITY ? 0.f : new_lo;  // nothing seen yet: keep everything at 0
    const float base_hi = new_hi == -INFINITY ? 0.f : new_hi;
    const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
    m_lo = new_lo;
    m_hi = new_hi;
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = exp2f(x[e] - (e % 2 == 0 ? base_lo : base_hi));
    l_lo = l_lo * alpha_lo + (pr[0] + pr[2]);
    l_hi = l_hi * alpha_hi + (pr[1] + pr[3]);
#pragma unroll
    for (int m = 0; m < kSteps; ++m) {
      acc[m][0] *= alpha_lo;
      acc[m][1] *= alpha_hi;
      acc[m][2] *= alpha_lo;
      acc[m][3] *= alpha_hi;
    }

    // P^T B fragments: write p[column][slot], read this lane's column g at slots 2t.. / 2t+8..
#pragma unroll
    for (int e = 0; e < 4; ++e) p_tile[(2 * t + e % 2) * kPStride + PSlot<kBf16>(g + 8 * (e / 2))] = pr[e];
    __syncwarp();
    const float2 p01 = *reinterpret_cast<const float2*>(p_tile + g * kPStride + 2 * t);
    const float2 p89 = *reinterpret_cast<const float2*>(p_tile + g * kPStride + 2 * t + 8);
    uint32_t ph0, pl0, ph1, pl1;
    SplitPair<kBf16>(p01.x, p01.y, ph0, pl0);
    SplitPair<kBf16>(p89.x, p89.y, ph1, pl1);

    // O^T += V^T P^T.
    if constexpr (kBf16) {
#pragma unroll
      for (int m = 0; m < kSteps; ++m) {
        uint32_t va[4];
        LdMatrixX4Trans(va, sv + v_lane + m * 32);
        Mma<true>(acc[m], va, ph0, ph1);
        Mma<true>(acc[m], va, pl0, pl1);
      }
    } else {
#pragma unroll
      for (int pp = 0; pp < HD / 32; ++pp) {
        uint32_t w[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) w[r] = Lds32(sv + (t + 4 * r) * Geo::kVStride + 32 * pp + 4 * g);
        const uint32_t x01 = __byte_perm(w[0], w[1], 0x5140), y01 = __byte_perm(w[0], w[1], 0x7362);
        const uint32_t x23 = __byte_perm(w[2], w[3], 0x5140), y23 = __byte_perm(w[2], w[3], 0x7362);
        const uint32_t va[4] = {Fp8Kv::PairToF16x2(x01 & 0xffffu), Fp8Kv::PairToF16x2(x01 >> 16),
                                Fp8Kv::PairToF16x2(x23 & 0xffffu), Fp8Kv::PairToF16x2(x23 >> 16)};
        const uint32_t vb[4] = {Fp8Kv::PairToF16x2(y01 & 0xffffu), Fp8Kv::PairToF16x2(y01 >> 16),
                                Fp8Kv::PairToF16x2(y23 & 0xffffu), Fp8Kv::PairToF16x2(y23 >> 16)};
        Mma<false>(acc[2 * pp], va, ph0, ph1);
        Mma<false>(acc[2 * pp], va, pl0, pl1);
        Mma<false>(acc[2 * pp + 1], vb, ph0, ph1);
        Mma<false>(acc[2 * pp + 1], vb, pl0, pl1);
      }
    }
  }

  // The split's state per column: l summed over the lanes of a column, O^T and (m, l) to shared
  // memory (the ring is free: every copy has landed and every lane is past its last read).
#pragma unroll
  for (int off = 4; off < 32; off *= 2) {
    l_lo += __shfl_xor_sync(kFullMask, l_lo, off);
    l_hi += __shfl_xor_sync(kFullMask, l_hi, off);
  }
  CpAsyncWait<0>();
  __syncwarp();
  float* o_tile = reinterpret_cast<float*>(decode_smem);  // [8][kOutStride]
#pragma unroll
  for (int m = 0; m < kSteps; ++m) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      o_tile[(2 * t + e % 2) * Geo::kOutStride + OutDim<kBf16>(m, g + 8 * (e / 2))] = acc[m][e];
    }
  }
  if (g == 0) {
    ml[2 * t] = m_lo;
    ml[2 * t + 1] = m_hi;
    ml[kCols + 2 * t] = l_lo;
    ml[kCols + 2 * t + 1] = l_hi;
  }
  __syncwarp();

  const int cols = min(kCols, ncols - col0);
  for (int c = 0; c < cols; ++c) {  // warp-uniform
    const int col = col0 + c, tok = tb + col / group, h = kvh * group + col % group;
    const float* o = o_tile + c * Geo::kOutStride;
    if (p.num_splits == 1) {
      const float inv = p.v_mul / ml[kCols + c];
      const float* gate =
          p.gate + static_cast<size_t>(tok) * p.gate_row_stride + static_cast<size_t>(h) * p.gate_head_stride;
      __half* out = p.out + (static_cast<size_t>(tok) * p.heads + h) * HD;
      for (int d = lane; d < HD; d += 32) out[d] = __float2half_rn(o[d] * inv / (1.0f + __expf(-gate[d])));
    } else {
      const size_t row = (static_cast<size_t>(split) * bt.num_tokens + tok) * p.heads + h;
      float* dst = p.ws.acc + row * HD;
      for (int d = 4 * lane; d < HD; d += 128) {
        *reinterpret_cast<float4*>(dst + d) = make_float4(o[d], o[d + 1], o[d + 2], o[d + 3]);
      }
      if (lane == 0) {
        p.ws.m[row] = ml[c];
        p.ws.l[row] = ml[kCols + c];
      }
    }
  }
}

// ---- Launch -----------------------------------------------------------------------------------

template <typename Kv, int HD>
cudaError_t Launch(const DecodeParams& p, cudaStream_t stream) {
  using Geo = DecodeGeometry<Kv, HD>;
  auto kernel = DecodeAttentionKernel<Kv, HD>;
  // Most shared memory (over L1) a SM: 4 blocks of ~55 KiB fit an H200 SM only with the largest carveout.
  static const cudaError_t attr = [&] {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Geo::kSmemBytes);
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  }();
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(p.batch.num_seqs) * p.col_tiles, p.kv.kv_heads, p.num_splits);
  const cudaError_t err = LaunchStepKernel(kernel, grid, dim3(32), Geo::kSmemBytes, stream, p);
  if (err != cudaSuccess || p.num_splits == 1) return err;
  return decode_attention::LaunchDecodeCombine(p, stream);
}

template <typename Kv>
cudaError_t LaunchForHeadDim(const DecodeParams& p, cudaStream_t stream) {
  switch (p.kv.head_dim) {
    case 64:
      return Launch<Kv, 64>(p, stream);
    case 128:
      return Launch<Kv, 128>(p, stream);
    default:
      return Launch<Kv, 256>(p, stream);
  }
}

}  // namespace

bool DecodeAttentionSupports(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

int DecodeAttentionColumnTiles(int max_seq_tokens, int group) {
  const int tokens = std::clamp(max_seq_tokens, 1, kPerTokenMaxTokens);
  return (tokens * group + kCols - 1) / kCols;
}

int DecodeAttentionSplitCap(int num_tokens) {
  const int target = kDecodeBlocksPerSm * MultiprocessorCount();
  return std::max(1, target / std::max(num_tokens, 1));
}

int DecodeAttentionSplits(int num_seqs, int num_tokens, int max_seq_tokens, int kv_heads, int group) {
  const long long units =
      static_cast<long long>(num_seqs) * kv_heads * DecodeAttentionColumnTiles(max_seq_tokens, group);
  const long long target = static_cast<long long>(kDecodeBlocksPerSm) * MultiprocessorCount();
  const long long splits = std::max(1LL, target / std::max(units, 1LL));
  return static_cast<int>(std::min<long long>(splits, DecodeAttentionSplitCap(num_tokens)));
}

size_t DecodeAttentionSmemBytes(int head_dim, KvDtype dtype) {
  const bool bf16 = dtype == KvDtype::kBf16;
  switch (head_dim) {
    case 64:
      return bf16 ? DecodeGeometry<Bf16Kv, 64>::kSmemBytes : DecodeGeometry<Fp8Kv, 64>::kSmemBytes;
    case 128:
      return bf16 ? DecodeGeometry<Bf16Kv, 128>::kSmemBytes : DecodeGeometry<Fp8Kv, 128>::kSmemBytes;
    case 256:
      return bf16 ? DecodeGeometry<Bf16Kv, 256>::kSmemBytes : DecodeGeometry<Fp8Kv, 256>::kSmemBytes;
    default:
      return 0;
  }
}

cudaError_t LaunchDecodeAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                  const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                  int gate_head_stride, __half* out, float* workspace, cudaStream_t stream) {
  const bool fp8 = kv.dtype == KvDtype::kFp8E4M3;
  DecodeParams p;
  static_cast<AttentionCall&>(p) = MakeAttentionCall(q, heads, kv, batch, gate, gate_row_stride, gate_head_stride, out);
  p.col_tiles = DecodeAttentionColumnTiles(batch.max_seq_tokens, p.group);
  p.num_splits = DecodeAttentionSplits(batch.num_seqs, batch.num_tokens, batch.max_seq_tokens, kv.kv_heads, p.group);
  p.qk_scale = scale * kLog2e * (fp8 ? kv.k_scale : 1.0f);
  p.ws = CarveSplitPartials(workspace, p.num_splits, batch.num_tokens, heads, kv.head_dim);
  return fp8 ? LaunchForHeadDim<Fp8Kv>(p, stream) : LaunchForHeadDim<Bf16Kv>(p, stream);
}

}  // namespace sparkserve::kernels::cuda
