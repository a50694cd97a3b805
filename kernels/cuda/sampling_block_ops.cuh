// Block-wide building blocks of the sampling kernel (sampling.cu): deterministic reductions and
// scans (fixed order, so a row gives the same result on every run), the order-preserving keys and
// bitonic sort used to select candidates, float-float accumulation and the two exp functions.
// Every Block* function must be called by all threads of the block and ends with __syncthreads().
// nvcc only (included by sampling.cu); the library is built with --use_fast_math, so every float
// operation whose rounding matters is written with an explicit _rn intrinsic (no contraction, IEEE
// division).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkserve::kernels::cuda::sampling_detail {

inline constexpr int kThreads = 1024;             // one block per row
inline constexpr int kWarps = kThreads / 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kSortCap = 2048;             // keys a block sorts at once (2 per thread)
inline constexpr int kHistBins = 2048;            // radix digits of up to 11 bits
// The smallest x whose glibc expf(x) is not 0 (x below it: the CPU sampler's weight underflows).
inline constexpr float kMinExpArg = -0x1.9fe368p+6f;

struct BlockScratch {
  double d[kWarps];
  float f[kWarps];
  int i[kWarps];
  int j[kWarps];
};

__device__ __forceinline__ int LaneId() { return static_cast<int>(threadIdx.x) & 31; }
__device__ __forceinline__ int WarpId() { return static_cast<int>(threadIdx.x) >> 5; }

// NaN / finiteness from the bits (independent of any fast-math assumption).
__device__ __forceinline__ bool IsNan(float v) { return (__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ bool IsFinite(float v) { return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u; }

// ---- reductions (result in every thread) ----
// Each warp reduces its lanes, lane 0 publishes the warp's result, and after the barrier every warp
// reduces the 32 published values with the same shuffles (lane w reads warp w's value) and takes
// lane 0's result, so all threads hold bit-identical results in a fixed order. There is no serial
// loop over the published values: with one (`for w in 1..31: if better(s[w]) take it`), SampleKernel
// built by nvcc 13.0 for sm_90a lost the maxima of warps 25-27 on the H200 — every row whose max sat
// at ids 800-895 mod 1024, deterministic, not a race (a delayed warp changed nothing, sanitizers
// were clean), while the same source in a small standalone kernel was right: a code-generation
// problem we did not pin further (tests/gpu/ops/sampling_test.cc GpuSampling.MaxTokenAtEveryId).

__device__ __forceinline__ double WarpSumToLane0(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullMask, v, o);
  return __shfl_sync(kFullMask, v, 0);
}

__device__ __forceinline__ double BlockSum(double v, BlockScratch& s) {
  v = WarpSumToLane0(v);
  if (LaneId() == 0) s.d[WarpId()] = v;
  __syncthreads();
  const double r = WarpSumToLane0(s.d[LaneId()]);
  __syncthreads();
  return r;
}

__device__ __forceinline__ int BlockSum(int v, BlockScratch& s) {
  v = __reduce_add_sync(kFullMask, v);
  if (LaneId() == 0) s.i[WarpId()] = v;
  __syncthreads();
  const int r = __reduce_add_sync(kFullMask, s.i[LaneId()]);
  __syncthreads();
  return r;
}

__device__ __forceinline__ int BlockMin(int v, BlockScratch& s) {
  v = __reduce_min_sync(kFullMask, v);
  if (LaneId() == 0) s.i[WarpId()] = v;
  __syncthreads();
  const int r = __reduce_min_sync(kFullMask, s.i[LaneId()]);
  __syncthreads();
  return r;
}

__device__ __forceinline__ int BlockMaxInt(int v, BlockScratch& s) {
  v = __reduce_max_sync(kFullMask, v);
  if (LaneId() == 0) s.i[WarpId()] = v;
  __syncthreads();
  const int r = __reduce_max_sync(kFullMask, s.i[LaneId()]);
  __syncthreads();
  return r;
}

// (value, id) with the larger value, the lower id on equal values. id INT_MAX: none.
__device__ __forceinline__ bool ArgBetter(float v, int id, float best_v, int best_id) {
  return v > best_v || (v == best_v && id < best_id);
}

// The best (value, id) over the lanes of a warp, in every lane (a total order: the butterfly gives
// every lane the same answer).
__device__ __forceinline__ void WarpArgmax(float& v, int& id) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, v, o);
    const int oid = __shfl_xor_sync(kFullMask, id, o);
    if (ArgBetter(ov, oid, v, id)) {
      v = ov;
      id = oid;
    }
  }
}

__device__ __forceinline__ void BlockArgmax(float& v, int& id, BlockScratch& s) {
  WarpArgmax(v, id);
  if (LaneId() == 0) {
    s.f[WarpId()] = v;
    s.i[WarpId()] = id;
  }
  __syncthreads();
  v = s.f[LaneId()];
  id = s.i[LaneId()];
  WarpArgmax(v, id);
  __syncthreads();
}

// BlockArgmax that also ORs a flag over the block, with plain barriers only (no bar.red on the
// barrier the other reductions use). Returns the OR of `flag` over the block.
__device__ __forceinline__ int BlockArgmaxAnyNan(float& v, int& id, bool flag, BlockScratch& s) {
  const int any = __any_sync(kFullMask, flag);
  if (LaneId() == 0) s.j[WarpId()] = any;
  BlockArgmax(v, id, s);  // its first barrier also publishes s.j; s.j is read before its second
  const int r = __any_sync(kFullMask, s.j[LaneId()] != 0);
  __syncthreads();
  return r;
}

// ---- scans ----

// Inclusive prefix sum over the lanes of one warp.
__device__ __forceinline__ double WarpInclusiveScan(double v) {
  const int lane = LaneId();
  for (int o = 1; o < 32; o <<= 1) {
    const double t = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += t;
  }
  return v;
}

// Inclusive prefix sum over the threads in thread order.
__device__ __forceinline__ double BlockInclusiveScan(double v, BlockScratch& s) {
  v = WarpInclusiveScan(v);
  if (LaneId() == 31) s.d[WarpId()] = v;
  __syncthreads();
  const double warp_incl = WarpInclusiveScan(s.d[LaneId()]);  // the same in every warp
  const double off = __shfl_sync(kFullMask, warp_incl, (WarpId() + 31) & 31);
  __syncthreads();
  return WarpId() == 0 ? v : off + v;
}

// Exclusive prefix sum over the threads in thread order.
__device__ __forceinline__ int BlockExclusiveScan(int v, BlockScratch& s) {
  const int lane = LaneId();
  int x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(kFullMask, x, o);
    if (lane >= o) x += t;
  }
  if (lane == 31) s.i[WarpId()] = x;
  __syncthreads();
  int w = s.i[lane];  // inclusive scan of the warp totals
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(kFullMask, w, o);
    if (lane >= o) w += t;
  }
  const int off = __shfl_sync(kFullMask, w, (WarpId() + 31) & 31);
  __syncthreads();
  return (WarpId() == 0 ? 0 : off) + x - v;
}

// ---- keys and sorting ----

// Monotone map of a non-NaN float to uint32 (a < b <=> key(a) < key(b)); -0 and +0 share a key, as
// they compare equal.
__device__ __forceinline__ uint32_t OrderedKey(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float FromOrderedKey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Composite key of element `id` with value `v`: larger = better; equal values rank the lower id higher.
__device__ __forceinline__ uint64_t RankKey(float v, int id) {
  return (static_cast<uint64_t>(OrderedKey(v)) << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(id));
}

__device__ __forceinline__ int RankKeyId(uint64_t key) {
  return static_cast<int>(~static_cast<uint32_t>(key));
}

// Sorts keys[0, count) in descending order (count <= kSortCap). keys[count, pow2) are overwritten
// with 0 (below every RankKey) to pad the network. Starts and ends with __syncthreads().
__device__ __forceinline__ void BlockSortDescending(uint64_t* keys, int count) {
  int size = 1;
  while (size < count) size <<= 1;
  __syncthreads();
  for (int i = count + static_cast<int>(threadIdx.x); i < size; i += kThreads) keys[i] = 0;
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  for (int k = 2; k <= size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      if (t < size / 2) {
        const int i = 2 * j * (t / j) + (t % j);
        const int l = i + j;
        const uint64_t a = keys[i], b = keys[l];
        const bool descending = (i & k) == 0;
        if (descending ? (a < b) : (a > b)) {
          keys[i] = b;
          keys[l] = a;
        }
      }
      __syncthreads();
    }
  }
}

// ---- arithmetic ----

// Float-float accumulator: hi + lo holds a running sum of floats to ~2^-44 relative, with only
// single-precision operations (the row-wide passes: fp64 is slow on some of the targets).
struct FloatFloat {
  float hi = 0.0f, lo = 0.0f;
  __device__ __forceinline__ void Add(float w) {  // Knuth's TwoSum
    const float s = __fadd_rn(hi, w);
    const float bb = __fsub_rn(s, hi);
    const float err = __fadd_rn(__fsub_rn(hi, __fsub_rn(s, bb)), __fsub_rn(w, bb));
    hi = s;
    lo = __fadd_rn(lo, err);
  }
  // Sum over the 32 lanes of a warp, in every lane (the butterfly is exact in hi, so all lanes agree).
  __device__ __forceinline__ void WarpReduce() {
    for (int o = 16; o > 0; o >>= 1) {
      const float ohi = __shfl_xor_sync(kFullMask, hi, o);
      const float olo = __shfl_xor_sync(kFullMask, lo, o);
      const float s = __fadd_rn(hi, ohi);
      const float bb = __fsub_rn(s, hi);
      const float err = __fadd_rn(__fsub_rn(hi, __fsub_rn(s, bb)), __fsub_rn(ohi, bb));
      hi = s;
      lo = __fadd_rn(__fadd_rn(lo, olo), err);
    }
  }
  __device__ __forceinline__ double Value() const { return static_cast<double>(hi) + static_cast<double>(lo); }
};

// exp(x) for x <= 0 in single precision to about 1 ulp (Cody-Waite reduction, degree-7 Taylor);
// 0 below 2^-126. ExpRow(0) == 1 exactly. Used by the row-wide sums, where a 1-ulp difference to
// the CPU's expf only moves cumulative sums by ~1e-15 of the total.
__device__ __forceinline__ float ExpRow(float x) {
  if (!(x >= -88.0f)) return IsNan(x) ? x : 0.0f;  // below: under 2^-126 (flushed); NaN stays NaN
  const float k = rintf(__fmul_rn(x, 1.44269504088896341f));
  float r = __fmaf_rn(k, -0x1.62e430p-1f, x);
  r = __fmaf_rn(k, 0x1.05c610p-29f, r);
  float p = 1.98412698e-4f;  // 1/7!
  p = __fmaf_rn(p, r, 1.38888889e-3f);
  p = __fmaf_rn(p, r, 8.33333333e-3f);
  p = __fmaf_rn(p, r, 4.16666667e-2f);
  p = __fmaf_rn(p, r, 1.66666667e-1f);
  p = __fmaf_rn(p, r, 0.5f);
  p = __fmaf_rn(p, r, 1.0f);
  p = __fmaf_rn(p, r, 1.0f);
  const int e = static_cast<int>(k);  // in [-127, 0]
  if (e < -126) return 0.0f;
  return __fmul_rn(p, __int_as_float((e + 127) << 23));
}

// exp(x) rounded to float through double precision: the correctly rounded value except in ~1e-9 of
// cases, so it matches glibc's expf (the CPU sampler) in all but ~0.1% of inputs. Used for the
// <= kSortCap candidate weights, whose order and sums decide which token is drawn.
__device__ __forceinline__ float ExpExact(float x) {
  return __double2float_rn(exp(static_cast<double>(x)));
}

}  // namespace sparkserve::kernels::cuda::sampling_detail
