// Row-wise kernels around the linears: embedding gather, zero-centred RMSNorm (plain and fused
// with the residual add), row gathers, SwiGLU, f32 -> f16 and the residual add.
//
// Every kernel has a 16-byte vector path (4 floats / 8 bf16 a load) taken when the row length and
// every pointer allow it, and a scalar path for the rest (odd dims, offset pointers). RMSNorm keeps
// its row in registers between the sum of squares and the scaling (fp32 reduction): one warp per
// row up to 512 elements, else one block per row.
#include "kernels/cuda/norm_ops_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/step_launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kNormWarpMaxDim = 512;  // rows up to this many elements take one warp each
constexpr int kNormRowsPerWarpBlock = 4;
constexpr int kNormMaxFloatsPerThread = 16;
constexpr int kElementwiseThreads = 256;
constexpr int64_t kElementwiseMaxBlocks = 16384;  // grid-stride beyond this

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Four floats as four f16 in 8 bytes (for one 8-byte store).
__device__ __forceinline__ uint2 ToHalf4Saturated(float4 v) {
  const __half2 lo = __floats2half2_rn(SaturateToHalfRange(v.x), SaturateToHalfRange(v.y));
  const __half2 hi = __floats2half2_rn(SaturateToHalfRange(v.z), SaturateToHalfRange(v.w));
  return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32), the same value in every thread. Called once per
// kernel: its shared array is never reused.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[32];
  v = WarpSum(v);
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0.f;
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int i = 0; i < warps; ++i) total += partial[i];
  return total;
}

__device__ __forceinline__ float4 operator+(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ float SumSquares(float a) { return a * a; }
__device__ __forceinline__ float SumSquares(float4 a) { return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w; }
__device__ __forceinline__ float Normed(float x, float inv, float w) { return (x * inv) * (1.0f + w); }
__device__ __forceinline__ float4 Normed(float4 x, float inv, float4 w) {
  return make_float4(Normed(x.x, inv, w.x), Normed(x.y, inv, w.y), Normed(x.z, inv, w.z), Normed(x.w, inv, w.w));
}
__device__ __forceinline__ void StoreHalf(__half* p, float v) { *p = ToHalfSaturated(v); }
__device__ __forceinline__ void StoreHalf(__half* p, float4 v) { *reinterpret_cast<uint2*>(p) = ToHalf4Saturated(v); }

// ---- RMSNorm ----
// kVec: units are float4 (dim % 4 == 0, pointers 16-byte aligned, out_f16 8-byte aligned), else
// floats. kWarpPerRow: a warp per row (kNormRowsPerWarpBlock rows a block), else the block is the
// row (blockDim.x * kMaxUnits >= units, checked by the launcher). kAdd: x = residual, which
// receives x + delta before the norm. x and out_f32 may alias: each element is read (into
// registers) before it is written, by the same thread.
template <bool kVec, bool kWarpPerRow, bool kAdd>
__global__ void __launch_bounds__(1024)
    RmsNormKernel(const float* x, const float* __restrict__ delta, float* residual, const float* __restrict__ w,
                  int rows, int dim, float eps, float* out_f32, __half* out_f16) {
  WaitForPriorGrids();
  AllowNextGrid();
  using Unit = std::conditional_t<kVec, float4, float>;
  constexpr int kFloats = kVec ? 4 : 1;
  constexpr int kMaxUnits = kNormMaxFloatsPerThread / kFloats;
  int row, tid, group;
  if constexpr (kWarpPerRow) {
    row = static_cast<int>(blockIdx.x) * kNormRowsPerWarpBlock + static_cast<int>(threadIdx.x / 32);
    tid = static_cast<int>(threadIdx.x % 32);
    group = 32;
    if (row >= rows) return;  // whole warps leave; no block-wide sync in this mode
  } else {
    row = static_cast<int>(blockIdx.x);
    tid = static_cast<int>(threadIdx.x);
    group = static_cast<int>(blockDim.x);
  }
  const int units = dim / kFloats;
  const size_t base = static_cast<size_t>(row) * dim;
  const Unit* xr = reinterpret_cast<const Unit*>(x + base);

  Unit v[kMaxUnits];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxUnits; ++j) {
    const int u = tid + j * group;
    if (u < units) {
      v[j] = xr[u];
      if constexpr (kAdd) {
        v[j] = v[j] + reinterpret_cast<const Unit*>(delta + base)[u];
        reinterpret_cast<Unit*>(residual + base)[u] = v[j];
      }
      ss += SumSquares(v[j]);
    }
  }
  if constexpr (kWarpPerRow) {
    ss = WarpSum(ss);
  } else {
    ss = BlockSum(ss);
  }
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  const Unit* wu = reinterpret_cast<const Unit*>(w);
#pragma unroll
  for (int j = 0; j < kMaxUnits; ++j) {
    const int u = tid + j * group;
    if (u < units) {
      const Unit o = Normed(v[j], inv, wu[u]);
      if (out_f32 != nullptr) reinterpret_cast<Unit*>(out_f32 + base)[u] = o;
      if (out_f16 != nullptr) StoreHalf(out_f16 + base + static_cast<size_t>(u) * kFloats, o);
    }
  }
}

template <bool kVec, bool kAdd>
cudaError_t LaunchRmsNormTyped(const float* x, const float* delta, float* residual, const float* w, int rows, int dim,
                               float eps, float* out_f32, __half* out_f16, cudaStream_t stream) {
  constexpr int kFloats = kVec ? 4 : 1;
  constexpr int kMaxUnits = kNormMaxFloatsPerThread / kFloats;
  const int units = dim / kFloats;
  if (dim <= kNormWarpMaxDim) {
    const int blocks = (rows + kNormRowsPerWarpBlock - 1) / kNormRowsPerWarpBlock;
    LaunchStepKernel(RmsNormKernel<kVec, true, kAdd>, dim3(blocks), dim3(kNormRowsPerWarpBlock * 32), 0, stream, x,
                     delta, residual, w, rows, dim, eps, out_f32, out_f16);
  } else {
    // About kMaxUnits units a thread (the most registers hold), whole warps, at most 1024 threads.
    const int threads = std::clamp((units + kMaxUnits - 1) / kMaxUnits + 31, 32, 1024) / 32 * 32;
    if (static_cast<int64_t>(threads) * kMaxUnits < units) return cudaErrorInvalidValue;
    LaunchStepKernel(RmsNormKernel<kVec, false, kAdd>, dim3(rows), dim3(threads), 0, stream, x, delta, residual, w,
                     rows, dim, eps, out_f32, out_f16);
  }
  return cudaGetLastError();
}

// ---- row copies ----
// out[i, :] = table[ids[i], :] as f32; a zero row for ids outside [0, vocab). One block per row.
// kVec: 8 bf16 (16 bytes) in, two float4 out.
template <bool kVec>
__global__ void EmbeddingGatherKernel(const __nv_bfloat16* __restrict__ table, int64_t vocab, int dim,
                                      const int32_t* __restrict__ ids, float* __restrict__ out) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int i = static_cast<int>(blockIdx.x);
  const int32_t id = ids[i];
  const bool valid = id >= 0 && id < vocab;
  const __nv_bfloat16* src = table + (valid ? static_cast<size_t>(id) * dim : 0);
  float* dst = out + static_cast<size_t>(i) * dim;
  if constexpr (kVec) {
    const int units = dim / 8;
    for (int u = static_cast<int>(threadIdx.x); u < units; u += static_cast<int>(blockDim.x)) {
      float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
      if (valid) {
        const uint4 b = __ldg(reinterpret_cast<const uint4*>(src) + u);
        lo = Bf16QuadToFloat4(make_uint2(b.x, b.y));
        hi = Bf16QuadToFloat4(make_uint2(b.z, b.w));
      }
      reinterpret_cast<float4*>(dst)[2 * u] = lo;
      reinterpret_cast<float4*>(dst)[2 * u + 1] = hi;
    }
  } else {
    for (int c = static_cast<int>(threadIdx.x); c < dim; c += static_cast<int>(blockDim.x)) {
      dst[c] = valid ? __bfloat162float(src[c]) : 0.f;
    }
  }
}

// out[i, :] = x[rows_idx[i], :]. One block per row; kVec: float4 units.
template <bool kVec>
__global__ void GatherRowsKernel(const float* __restrict__ x, int dim, const int32_t* __restrict__ rows_idx,
                                 float* __restrict__ out) {
  WaitForPriorGrids();
  AllowNextGrid();
  using Unit = std::conditional_t<kVec, float4, float>;
  const int i = static_cast<int>(blockIdx.x);
  const int units = dim / (kVec ? 4 : 1);
  const Unit* src = reinterpret_cast<const Unit*>(x + static_cast<size_t>(rows_idx[i]) * dim);
  Unit* dst = reinterpret_cast<Unit*>(out + static_cast<size_t>(i) * dim);
  for (int u = static_cast<int>(threadIdx.x); u < units; u += static_cast<int>(blockDim.x)) dst[u] = src[u];
}

int RowCopyThreads(int units) { return std::clamp((units + 31) / 32 * 32, 32, 256); }

// ---- SwiGLU (Silu: device_common.cuh) ----

// out[r, c] = silu(gate[r * ld + c]) * up[r * ld + c] (f16). Block b covers row b / col_blocks,
// columns (b % col_blocks) * blockDim.x * kFloats onwards. kVec: 4 columns a thread (cols % 4 ==
// 0, ld % 4 == 0, gate/up 16-byte and out 8-byte aligned).
template <bool kVec>
__global__ void SwiGluKernel(const float* __restrict__ gate, const float* __restrict__ up, int cols, int ld,
                             int col_blocks, __half* __restrict__ out) {
  WaitForPriorGrids();
  AllowNextGrid();
  constexpr int kFloats = kVec ? 4 : 1;
  const int r = static_cast<int>(blockIdx.x) / col_blocks;
  const int c = ((static_cast<int>(blockIdx.x) % col_blocks) * static_cast<int>(blockDim.x) +
                 static_cast<int>(threadIdx.x)) * kFloats;
  if (c >= cols) return;
  const size_t in_off = static_cast<size_t>(r) * ld + c, out_off = static_cast<size_t>(r) * cols + c;
  if constexpr (kVec) {
    const float4 g = *reinterpret_cast<const float4*>(gate + in_off);
    const float4 u = *reinterpret_cast<const float4*>(up + in_off);
    StoreHalf(out + out_off, make_float4(Silu(g.x) * u.x, Silu(g.y) * u.y, Silu(g.z) * u.z, Silu(g.w) * u.w));
  } else {
    out[out_off] = ToHalfSaturated(Silu(gate[in_off]) * up[in_off]);
  }
}

// ---- flat elementwise ----
// Work items [0, vecs) are float4 units, [vecs, vecs + tail) single floats after them.
__global__ void F32ToF16Kernel(const float* __restrict__ x, int64_t vecs, int64_t tail, __half* __restrict__ out) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs + tail; i += stride) {
    if (i < vecs) {
      StoreHalf(out + 4 * i, reinterpret_cast<const float4*>(x)[i]);
    } else {
      const int64_t e = 4 * vecs + (i - vecs);
      out[e] = ToHalfSaturated(x[e]);
    }
  }
}

// x and y may be the same array (x doubles): no __restrict__.
__global__ void AddInPlaceKernel(float* x, const float* y, int64_t vecs, int64_t tail) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vecs + tail; i += stride) {
    if (i < vecs) {
      float4* xv = reinterpret_cast<float4*>(x) + i;
      *xv = *xv + reinterpret_cast<const float4*>(y)[i];
    } else {
      const int64_t e = 4 * vecs + (i - vecs);
      x[e] += y[e];
    }
  }
}

unsigned ElementwiseBlocks(int64_t items) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((items + kElementwiseThreads - 1) / kElementwiseThreads, 1, kElementwiseMaxBlocks));
}

}  // namespace

cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, int64_t vocab, int dim, const int32_t* ids, int n,
                                  float* out, cudaStream_t stream) {
  if (dim % 8 == 0 && Aligned(table, 16) && Aligned(out, 16)) {
    LaunchStepKernel(EmbeddingGatherKernel<true>, dim3(n), dim3(RowCopyThreads(dim / 8)), 0, stream, table, vocab, dim,
                     ids, out);
  } else {
    LaunchStepKernel(EmbeddingGatherKernel<false>, dim3(n), dim3(RowCopyThreads(dim)), 0, stream, table, vocab, dim,
                     ids, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormZeroCentered(const float* x, const float* delta, float* residual, const float* w, int rows,
                                      int dim, float eps, float* out_f32, __half* out_f16, cudaStream_t stream) {
  const bool vec = dim % 4 == 0 && Aligned(x, 16) && Aligned(w, 16) && Aligned(delta, 16) && Aligned(out_f32, 16) &&
                   Aligned(out_f16, 8);  // null pointers count as aligned
  if (delta != nullptr) {
    return vec ? LaunchRmsNormTyped<true, true>(x, delta, residual, w, rows, dim, eps, out_f32, out_f16, stream)
               : LaunchRmsNormTyped<false, true>(x, delta, residual, w, rows, dim, eps, out_f32, out_f16, stream);
  }
  return vec ? LaunchRmsNormTyped<true, false>(x, nullptr, nullptr, w, rows, dim, eps, out_f32, out_f16, stream)
             : LaunchRmsNormTyped<false, false>(x, nullptr, nullptr, w, rows, dim, eps, out_f32, out_f16, stream);
}

cudaError_t LaunchGatherRows(const float* x, int dim, const int32_t* rows_idx, int n, float* out,
                             cudaStream_t stream) {
  if (dim % 4 == 0 && Aligned(x, 16) && Aligned(out, 16)) {
    LaunchStepKernel(GatherRowsKernel<true>, dim3(n), dim3(RowCopyThreads(dim / 4)), 0, stream, x, dim, rows_idx, out);
  } else {
    LaunchStepKernel(GatherRowsKernel<false>, dim3(n), dim3(RowCopyThreads(dim)), 0, stream, x, dim, rows_idx, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchSwiGlu(const float* gate, const float* up, int rows, int cols, int ld, __half* out,
                         cudaStream_t stream) {
  const bool vec = cols % 4 == 0 && ld % 4 == 0 && Aligned(gate, 16) && Aligned(up, 16) && Aligned(out, 8);
  const int per_thread = vec ? 4 : 1;
  const int threads = std::clamp((cols / per_thread + 31) / 32 * 32, 32, kElementwiseThreads);
  const int col_blocks = (cols + threads * per_thread - 1) / (threads * per_thread);
  const int64_t blocks = static_cast<int64_t>(rows) * col_blocks;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  if (vec) {
    LaunchStepKernel(SwiGluKernel<true>, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream, gate, up, cols,
                     ld, col_blocks, out);
  } else {
    LaunchStepKernel(SwiGluKernel<false>, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, stream, gate, up, cols,
                     ld, col_blocks, out);
  }
  return cudaGetLastError();
}

cudaError_t LaunchF32ToF16(const float* x, int64_t n, __half* out, cudaStream_t stream) {
  const int64_t vecs = (Aligned(x, 16) && Aligned(out, 8)) ? n / 4 : 0;
  const int64_t tail = n - 4 * vecs;
  LaunchStepKernel(F32ToF16Kernel, dim3(ElementwiseBlocks(vecs + tail)), dim3(kElementwiseThreads), 0, stream, x, vecs,
                   tail, out);
  return cudaGetLastError();
}

cudaError_t LaunchAddInPlace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  const int64_t vecs = (Aligned(x, 16) && Aligned(y, 16)) ? n / 4 : 0;
  const int64_t tail = n - 4 * vecs;
  LaunchStepKernel(AddInPlaceKernel, dim3(ElementwiseBlocks(vecs + tail)), dim3(kElementwiseThreads), 0, stream, x, y,
                   vecs, tail);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
