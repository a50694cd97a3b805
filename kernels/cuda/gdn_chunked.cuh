// Internal to the chunked Gated DeltaNet (gdn_chunked_prep.cu, gdn_chunked.cu): the parameters the
// three kernels share, where a chunk slot's seq and tokens are, cp.async, and the TF32 mma pieces
// (fragment loads with the 3xTF32 split, and the f32 emulation the kChunkedSimt variant runs).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gdn_kernels.h"
#include "kernels/cuda/ptx.cuh"

namespace sparkserve::kernels::cuda::gdn_chunked {

constexpr int kC = kGdnChunkTokens;        // tokens a chunk (64)
constexpr int kW = kGdnChunkSliceColumns;  // value columns a recurrence block (32)
constexpr int kThreads = 256;              // every chunked kernel: 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kLdKt = kC + 4;              // KT / A / T row stride (floats): A-fragment reads hit 32 banks
constexpr int kLdP = kC + 8;               // P row stride (halves)
constexpr int kLdSlice = kW + 8;           // [*, 32] slices (S, delta): B-fragment reads hit 32 banks
static_assert(kC == 64 && kW == 32, "the tile loops are written for 64-token chunks and 32-column slices");

struct GdnChunkParams : GdnLayerParams {
  GdnChunkLayout lay;
  int min_tokens;  // seqs with fewer tokens are left to the sequential kernel
  int num_slots;   // GdnChunkSlots(num_tokens, num_seqs): the grid of prep / output, the records' rows
  int num_tokens;  // rows of O
  bool vec_loads;  // q/k/v rows 16-byte aligned: 16-byte cp.async (else 4-byte)
  uint8_t* records;  // [num_slots][nv] records of lay.bytes
  float* o;          // [num_tokens][nv][dv], token index relative to token_begin[0]
};

// Where chunk slot x lies: seq s's chunks take slots base(s) = (token_begin[s] - token_begin[0]) / 64
// + s onwards (strictly increasing in s, gaps between seqs). valid: x is chunk `chunk` of seq `seq`
// (tokens [tok_abs, tok_abs + n) of the step, O rows from tok_rel) and the seq is the chunked path's.
struct ChunkRef {
  bool valid = false;
  int seq = 0, chunk = 0, n = 0, tok_abs = 0, tok_rel = 0;
};

__device__ __forceinline__ ChunkRef LocateChunk(const GdnChunkParams& p, int x) {
  const int32_t* tb = p.batch.token_begin;
  const int tb0 = tb[0];
  int lo = 0, hi = p.batch.num_seqs - 1;  // the last seq whose base is <= x
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if ((tb[mid] - tb0) / kC + mid <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  ChunkRef r;
  const int begin = tb[lo], tokens = tb[lo + 1] - begin;
  const int chunk = x - ((begin - tb0) / kC + lo);
  if (tokens < p.min_tokens || tokens <= 0 || chunk < 0 || chunk * kC >= tokens) return r;
  r.valid = true;
  r.seq = lo;
  r.chunk = chunk;
  r.n = min(kC, tokens - chunk * kC);
  r.tok_abs = begin + chunk * kC;
  r.tok_rel = begin - tb0 + chunk * kC;
  return r;
}


// ---- m16n8k8 TF32 mma. Lane = 4 g + t holds A (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4);
// B (t, g), (t + 4, g); C (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).

__device__ __forceinline__ int LaneG() { return (static_cast<int>(threadIdx.x) & 31) >> 2; }
__device__ __forceinline__ int LaneT() { return static_cast<int>(threadIdx.x) & 3; }

__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// kExact: hi = x exactly (the emulation multiplies f32s), lo unused. Else x = hi + lo in TF32 (the
// 3xTF32 split: hi lo + lo hi + hi hi is ~f32 accurate; hi alone is plain TF32).
template <bool kExact>
__device__ __forceinline__ void Split(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (kExact) {
    hi = __float_as_uint(x);
    lo = 0u;
  } else {
    hi = ToTf32(x);
    lo = ToTf32(x - __uint_as_float(hi));
  }
}

__device__ __forceinline__ void MmaHw(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The same product with f32 FMAs, every operand fetched from the lane the layout above puts it in.
__device__ __forceinline__ void MmaEmulated(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  const int g = LaneG(), t = LaneT();
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int ka = 4 * g + (k & 3);
    const float a0 = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? a[0] : a[2], ka));
    const float a1 = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? a[1] : a[3], ka));
    const float b0 = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? b[0] : b[1], 8 * t + (k & 3)));
    const float b1 = __uint_as_float(__shfl_sync(0xffffffffu, k < 4 ? b[0] : b[1], 8 * t + 4 + (k & 3)));
    c[0] = fmaf(a0, b0, c[0]);
    c[1] = fmaf(a0, b1, c[1]);
    c[2] = fmaf(a1, b0, c[2]);
    c[3] = fmaf(a1, b1, c[3]);
  }
}

// c += a b with the operands' hi parts (plain TF32, or exact f32 when emulated).
template <bool kExact>
__device__ __forceinline__ void Mma1(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  if constexpr (kExact) {
    MmaEmulated(c, a, b);
  } else {
    MmaHw(c, a, b);
  }
}

// big + small += a b at ~f32 accuracy (3xTF32; the small terms in their own accumulator).
template <bool kExact>
__device__ __forceinline__ void Mma3(float big[4], float small[4], const uint32_t ah[4], const uint32_t al[4],
                                     const uint32_t bh[2], const uint32_t bl[2]) {
  if constexpr (kExact) {
    MmaEmulated(big, ah, bh);
  } else {
    MmaHw(small, al, bh);
    MmaHw(small, ah, bl);
    MmaHw(big, ah, bh);
  }
}

// A fragment of the 16x8 tile at a (A(r, k) = a[r * ld + k]), times `scale`, split.
template <bool kExact>
__device__ __forceinline__ void LoadA(uint32_t hi[4], uint32_t lo[4], const float* a, int ld, float scale = 1.0f) {
  const int g = LaneG(), t = LaneT();
  Split<kExact>(scale * a[g * ld + t], hi[0], lo[0]);
  Split<kExact>(scale * a[(g + 8) * ld + t], hi[1], lo[1]);
  Split<kExact>(scale * a[g * ld + t + 4], hi[2], lo[2]);
  Split<kExact>(scale * a[(g + 8) * ld + t + 4], hi[3], lo[3]);
}

// A fragment from f16 storage: f16 values are exact in TF32, no split needed.
__device__ __forceinline__ void LoadA16(uint32_t a[4], const __half* p, int ld) {
  const int g = LaneG(), t = LaneT();
  a[0] = __float_as_uint(__half2float(p[g * ld + t]));
  a[1] = __float_as_uint(__half2float(p[(g + 8) * ld + t]));
  a[2] = __float_as_uint(__half2float(p[g * ld + t + 4]));
  a[3] = __float_as_uint(__half2float(p[(g + 8) * ld + t + 4]));
}

// B fragment of the 8x8 tile at b stored [k][n] (B(k, n) = b[k * ld + n]); row k scaled by s0 (k = t)
// and s1 (k = t + 4).
template <bool kExact>
__device__ __forceinline__ void LoadBKN(uint32_t hi[2], uint32_t lo[2], const float* b, int ld, float s0 = 1.0f,
                                        float s1 = 1.0f) {
  const int g = LaneG(), t = LaneT();
  Split<kExact>(s0 * b[t * ld + g], hi[0], lo[0]);
  Split<kExact>(s1 * b[(t + 4) * ld + g], hi[1], lo[1]);
}

// B fragment of the 8x8 tile at b stored [n][k] (B(k, n) = b[n * ld + k]).
template <bool kExact>
__device__ __forceinline__ void LoadBNK(uint32_t hi[2], uint32_t lo[2], const float* b, int ld) {
  const int g = LaneG(), t = LaneT();
  Split<kExact>(b[g * ld + t], hi[0], lo[0]);
  Split<kExact>(b[g * ld + t + 4], hi[1], lo[1]);
}

// The prep kernel (gdn_chunked_prep.cu): grid (nv, num_slots).
cudaError_t LaunchGdnChunkPrep(const GdnChunkParams& p, bool exact, cudaStream_t stream);
size_t GdnChunkPrepSmemBytes(const GdnChunkLayout& lay);

}  // namespace sparkserve::kernels::cuda::gdn_chunked
