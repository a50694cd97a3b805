// Dense bf16 linear y = x W^T (W bf16 [out, in], x f16 [rows, in], y f32 [rows, out]), fp32
// accumulation. Three kernels:
// - GEMV (rows <= 8, in % 8 == 0, 16-byte aligned W and x): a block owns kOuts output features over
//   the whole K range; its threads stride over K in 16-byte vectors (8 elements), so each weight
//   row is read once, coalesced, for every activation row; a warp-shuffle + shared-memory
//   reduction ends it. Small `out` takes kOuts = 1 so that there are still many blocks.
// - scalar GEMV (rows <= 8, any `in` or alignment): one block per output feature, one element a
//   thread a step.
// - tensor-core tiles (rows > 8, in % 8 == 0, 16-byte aligned W and x): mma.m16n8k16 (f16 in, f32
//   accumulate) on 32 or 64 rows x 32 outputs a block (16 rows and 32 warps where that leaves fewer
//   than 16 blocks: narrow outputs), the block's 8 warps splitting K and adding
//   their sums through shared memory; operands come straight from global memory (L2), 16 bytes a
//   lane a row, the next K step's loads issued before the current step's mma.
// - tiled fallback (rows > 8, any `in` or alignment): 64 x 64 output tiles, K steps of 16 staged in
//   shared memory as f32, 4 x 4 outputs a thread with fp32 FMA.
#include "kernels/cuda/dense_linear_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/step_launch.h"

#include <algorithm>
#include <cstdint>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kGemvMaxWarps = 8;
constexpr int kGemvMinBlocks = 512;  // below this many blocks, fewer outputs a block
constexpr int kScalarGemvThreads = 128;
constexpr int kTileN = 64;  // output features a tile
constexpr int kTileK = 16;
constexpr int kTileThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each
static_assert(kDenseTileRows == 64 && kTileN == 64 && kTileThreads == 256, "the tile mapping assumes these");

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Eight f16 (16 bytes) as floats.
__device__ __forceinline__ void HalfsToFloats(uint4 v, float f[8]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// acc += dot(eight bf16 in `wv`, x[0..8)); element 2i is the low half of word i.
__device__ __forceinline__ float DotBf16x8(uint4 wv, const float x[8], float acc) {
  const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 w = Bf16PairToFloat2(words[i]);
    acc = fmaf(w.x, x[2 * i], acc);
    acc = fmaf(w.y, x[2 * i + 1], acc);
  }
  return acc;
}

// grid: ceil(out / kOuts) blocks of blockDim.x (a multiple of 32, <= kGemvMaxWarps * 32) threads.
// Block b computes y[:, b*kOuts .. b*kOuts + kOuts) (features past `out` are computed on the last
// row and dropped). Thread t takes the 16-byte vectors t, t + blockDim.x, ... of every row.
template <int kRows, int kOuts>
__global__ void __launch_bounds__(kGemvMaxWarps * 32)
    GemvBf16Kernel(const __nv_bfloat16* __restrict__ w, int out, int in, const __half* __restrict__ x,
                   float* __restrict__ y) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int o0 = static_cast<int>(blockIdx.x) * kOuts;
  const int vecs = in / 8;
  const uint4* wrow[kOuts];
#pragma unroll
  for (int j = 0; j < kOuts; ++j) {
    wrow[j] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(min(o0 + j, out - 1)) * in);
  }
  const uint4* xv = reinterpret_cast<const uint4*>(x);

  float acc[kOuts][kRows];
#pragma unroll
  for (int j = 0; j < kOuts; ++j) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[j][r] = 0.f;
  }
#pragma unroll 2
  for (int v = static_cast<int>(threadIdx.x); v < vecs; v += static_cast<int>(blockDim.x)) {
    uint4 wv[kOuts];
#pragma unroll
    for (int j = 0; j < kOuts; ++j) wv[j] = LoadStreaming(wrow[j] + v);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float xf[8];
      HalfsToFloats(__ldg(xv + static_cast<size_t>(r) * vecs + v), xf);
#pragma unroll
      for (int j = 0; j < kOuts; ++j) acc[j][r] = DotBf16x8(wv[j], xf, acc[j][r]);
    }
  }

  __shared__ float partial[kGemvMaxWarps][kOuts * kRows];
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int j = 0; j < kOuts; ++j) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = WarpSum(acc[j][r]);
      if (lane == 0) partial[warp][j * kRows + r] = s;
    }
  }
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x);
  if (i < kOuts * kRows) {
    const int j = i / kRows, r = i % kRows;
    if (o0 + j < out) {
      float s = 0.f;
      const int warps = static_cast<int>(blockDim.x / 32);
      for (int p = 0; p < warps; ++p) s += partial[p][i];
      y[static_cast<size_t>(r) * out + o0 + j] = s;
    }
  }
}

// grid: out blocks of kScalarGemvThreads; any `in`, any alignment, rows <= kDenseGemvMaxRows.
__global__ void __launch_bounds__(kScalarGemvThreads)
    GemvBf16ScalarKernel(const __nv_bfloat16* __restrict__ w, int out, int in, const __half* __restrict__ x,
                         int rows, float* __restrict__ y) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int o = static_cast<int>(blockIdx.x);
  const __nv_bfloat16* wr = w + static_cast<size_t>(o) * in;
  float acc[kDenseGemvMaxRows];
#pragma unroll
  for (int r = 0; r < kDenseGemvMaxRows; ++r) acc[r] = 0.f;
  for (int k = static_cast<int>(threadIdx.x); k < in; k += kScalarGemvThreads) {
    const float wk = __bfloat162float(wr[k]);
#pragma unroll
    for (int r = 0; r < kDenseGemvMaxRows; ++r) {
      if (r < rows) acc[r] = fmaf(wk, __half2float(x[static_cast<size_t>(r) * in + k]), acc[r]);
    }
  }
  __shared__ float partial[kScalarGemvThreads / 32][kDenseGemvMaxRows];
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int r = 0; r < kDenseGemvMaxRows; ++r) {
    const float s = WarpSum(acc[r]);
    if (lane == 0) partial[warp][r] = s;
  }
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x);
  if (r < rows) {
    float s = 0.f;
    for (int p = 0; p < kScalarGemvThreads / 32; ++p) s += partial[p][r];
    y[static_cast<size_t>(r) * out + o] = s;
  }
}

// grid: (ceil(out / 64), ceil(rows / 64)), 256 threads. Thread (ty, tx) = (t / 16, t % 16) owns
// rows m0 + 4ty .. +4 and features n0 + 4tx .. +4. Each K step stages x[m0.., k0..k0+16) and
// w[n0.., k0..k0+16) transposed (k-major) as f32, zeros outside the matrices.
__global__ void __launch_bounds__(kTileThreads)
    DenseTiledKernel(const __nv_bfloat16* __restrict__ w, int out, int in, const __half* __restrict__ x, int rows,
                     float* __restrict__ y) {
  WaitForPriorGrids();
  AllowNextGrid();
  // +4 keeps rows 16-byte aligned for the float4 reads and spreads the transposed writes over banks.
  __shared__ __align__(16) float xs[kTileK][kDenseTileRows + 4];
  __shared__ __align__(16) float ws[kTileK][kTileN + 4];
  const int m0 = static_cast<int>(blockIdx.y) * kDenseTileRows, n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int t = static_cast<int>(threadIdx.x), ty = t / 16, tx = t % 16;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  }
  for (int k0 = 0; k0 < in; k0 += kTileK) {
    // 64 x 16 elements of each operand, 4 a thread; consecutive threads read consecutive k.
#pragma unroll
    for (int s = 0; s < kDenseTileRows * kTileK / kTileThreads; ++s) {
      const int e = t + s * kTileThreads;
      const int m = e / kTileK, k = e % kTileK, gk = k0 + k;
      const int gm = m0 + m, gn = n0 + m;
      xs[k][m] = (gm < rows && gk < in) ? __half2float(x[static_cast<size_t>(gm) * in + gk]) : 0.f;
      ws[k][m] = (gn < out && gk < in) ? __bfloat162float(w[static_cast<size_t>(gn) * in + gk]) : 0.f;
    }
    __syncthreads();  // the tile is complete before anyone reads it
#pragma unroll
    for (int k = 0; k < kTileK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[k][4 * ty]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[k][4 * tx]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();  // everyone is done reading before the next step overwrites the tile
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + 4 * ty + i;
    if (m >= rows) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + 4 * tx + j;
      if (n < out) y[static_cast<size_t>(m) * out + n] = acc[i][j];
    }
  }
}

// ---- tensor-core tiles ----
constexpr int kMmaWarps = 8;
constexpr int kMmaTileN = 32;  // outputs a block: 4 mma n-tiles of 8

// Eight bf16 (16 bytes) as four f16x2 words, saturated to the f16 range. bf16 -> f16 is exact for
// |w| in [2^-14, 65504] (8 significant bits fit in 11); smaller weights become f16 subnormals
// (absolute error <= 2^-25), larger ones are clamped.
__device__ __forceinline__ uint4 Bf16x8ToHalf(uint4 v) {
  const uint32_t in[4] = {v.x, v.y, v.z, v.w};
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 w = Bf16PairToFloat2(in[i]);
    const __half2 h = __floats2half2_rn(SaturateToHalfRange(w.x), SaturateToHalfRange(w.y));
    out[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// One warp's operands of a 32-element K step: lane (g, t) = (lane / 4, lane % 4) holds elements
// 8t..8t+7 of x rows 16i + g and 16i + g + 8 (i < kMTiles) and of W rows 8j + g (j < 4), zeros past
// `in`. The K order inside the step is permuted identically for both operands (any fixed
// permutation leaves the sum unchanged): the first mma takes each lane's elements 0..3 as its
// k-slots 2t, 2t+1, 2t+8, 2t+9, the second its elements 4..7.
template <int kMTiles>
struct MmaStep {
  uint4 x[kMTiles][2];
  uint4 w[4];
};

template <int kMTiles>
__device__ __forceinline__ void LoadMmaStep(MmaStep<kMTiles>& s, const uint4* const xrow[kMTiles][2],
                                            const uint4* const wrow[4], int vec, bool valid) {
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) s.x[i][h] = valid ? __ldg(xrow[i][h] + vec) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) s.w[j] = valid ? __ldg(wrow[j] + vec) : make_uint4(0, 0, 0, 0);
}

// grid (ceil(out / 32), ceil(rows / (16 kMTiles))), kWarps * 32 threads, dynamic shared memory
// kWarps * 16 kMTiles * 32 floats. Warp w takes the K steps w, w + kWarps, ...; rows and outputs
// past the matrices read a valid row (clamped) and are never stored.
template <int kMTiles, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    DenseMmaKernel(const __nv_bfloat16* __restrict__ w, int out, int in, const __half* __restrict__ x, int rows,
                   float* __restrict__ y) {
  WaitForPriorGrids();
  AllowNextGrid();
  constexpr int kTileM = 16 * kMTiles;
  extern __shared__ __align__(16) float sums[];  // [warp][kTileM][kMmaTileN]
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = static_cast<int>(blockIdx.y) * kTileM, n0 = static_cast<int>(blockIdx.x) * kMmaTileN;
  const int vecs = in / 8;  // 16-byte vectors a row
  const uint4* xrow[kMTiles][2];
  const uint4* wrow[4];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = min(m0 + 16 * i + g + 8 * h, rows - 1);
      xrow[i][h] = reinterpret_cast<const uint4*>(x + static_cast<size_t>(r) * in) + t;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    wrow[j] = reinterpret_cast<const uint4*>(w + static_cast<size_t>(min(n0 + 8 * j + g, out - 1)) * in) + t;
  }
  float acc[kMTiles][4][4];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    }
  }
  const int steps = (vecs + 3) / 4;  // 32-element K steps
  MmaStep<kMTiles> cur, next;
  LoadMmaStep(cur, xrow, wrow, 4 * warp, warp < steps && 4 * warp + t < vecs);
  for (int step = warp; step < steps; step += kWarps) {
    const int nstep = step + kWarps;
    LoadMmaStep(next, xrow, wrow, 4 * nstep, nstep < steps && 4 * nstep + t < vecs);
    uint4 wh[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) wh[j] = Bf16x8ToHalf(cur.w[j]);
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      const uint4 lo = cur.x[i][0], hi = cur.x[i][1];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        MmaF16F32(acc[i][j], lo.x, hi.x, lo.y, hi.y, wh[j].x, wh[j].y);
        MmaF16F32(acc[i][j], lo.z, hi.z, lo.w, hi.w, wh[j].z, wh[j].w);
      }
    }
    cur = next;
  }
  // The warps' partial sums meet in shared memory; accumulator e of tile (i, j) is row 16i + g + 8(e / 2),
  // output 8j + 2t + e % 2.
  float* mine = sums + warp * kTileM * kMmaTileN;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[(16 * i + g + 8 * (e >> 1)) * kMmaTileN + 8 * j + 2 * t + (e & 1)] = acc[i][j][e];
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < kTileM * kMmaTileN; idx += kWarps * 32) {
    const int r = m0 + idx / kMmaTileN, o = n0 + idx % kMmaTileN;
    float s = 0.f;
#pragma unroll
    for (int p = 0; p < kWarps; ++p) s += sums[p * kTileM * kMmaTileN + idx];
    if (r < rows && o < out) y[static_cast<size_t>(r) * out + o] = s;
  }
}

template <int kMTiles, int kWarps = kMmaWarps>
cudaError_t LaunchDenseMma(const __nv_bfloat16* w, int out, int in, const __half* x, int rows, float* y,
                           cudaStream_t stream) {
  constexpr int kTileM = 16 * kMTiles;
  const size_t smem = sizeof(float) * kWarps * kTileM * kMmaTileN;
  constexpr auto kernel = DenseMmaKernel<kMTiles, kWarps>;
  const cudaError_t attr = AllowDynamicSharedMemory<kernel>(static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  const dim3 grid((out + kMmaTileN - 1) / kMmaTileN, (rows + kTileM - 1) / kTileM);
  LaunchStepKernel(kernel, grid, dim3(kWarps * 32), smem, stream, w, out, in, x, rows, y);
  return cudaGetLastError();
}

// Warps for `vecs` 16-byte vectors a row: at most kGemvMaxWarps, as many iterations for each.
int GemvThreads(int vecs) {
  const int chunks = (vecs + 31) / 32;  // warp-wide loads a row
  const int iterations = (chunks + kGemvMaxWarps - 1) / kGemvMaxWarps;
  return std::clamp((chunks + iterations - 1) / iterations, 1, kGemvMaxWarps) * 32;
}

template <int kRows, int kOuts>
cudaError_t LaunchGemv(const __nv_bfloat16* w, int out, int in, const __half* x, float* y, cudaStream_t stream) {
  const int blocks = (out + kOuts - 1) / kOuts;
  LaunchStepKernel(GemvBf16Kernel<kRows, kOuts>, dim3(blocks), dim3(GemvThreads(in / 8)), 0, stream, w, out, in, x, y);
  return cudaGetLastError();
}

template <int kRows>
cudaError_t LaunchGemvRows(const __nv_bfloat16* w, int out, int in, const __half* x, float* y, cudaStream_t stream) {
  if ((out + 3) / 4 >= kGemvMinBlocks) return LaunchGemv<kRows, 4>(w, out, in, x, y, stream);
  if ((out + 1) / 2 >= kGemvMinBlocks) return LaunchGemv<kRows, 2>(w, out, in, x, y, stream);
  return LaunchGemv<kRows, 1>(w, out, in, x, y, stream);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t LaunchDenseLinearBf16(const __nv_bfloat16* w, int out, int in, const __half* x, int rows, float* y,
                                  cudaStream_t stream) {
  if (rows > kDenseGemvMaxRows) {
    if (rows > kDenseMaxRows) return cudaErrorInvalidValue;
    if (in % 8 == 0 && Aligned16(w) && Aligned16(x)) {
      // A narrow output (the GDN in_proj_a|b: 64 outputs) would get a handful of blocks whose 8 warps
      // each walk a long K: 16-row blocks of 32 warps instead (64 x 64 x 2560: 8 blocks, ~2.5 K steps
      // a warp; session 4 measured 18 us on 2 blocks of 8 warps).
      if ((out + kMmaTileN - 1) / kMmaTileN * ((rows + 63) / 64) < 16) {
        return LaunchDenseMma<1, 32>(w, out, in, x, rows, y, stream);
      }
      return rows <= 32 ? LaunchDenseMma<2>(w, out, in, x, rows, y, stream)
                        : LaunchDenseMma<4>(w, out, in, x, rows, y, stream);
    }
    const dim3 grid((out + kTileN - 1) / kTileN, (rows + kDenseTileRows - 1) / kDenseTileRows);
    LaunchStepKernel(DenseTiledKernel, dim3(grid), dim3(kTileThreads), 0, stream, w, out, in, x, rows, y);
    return cudaGetLastError();
  }
  if (in % 8 != 0 || !Aligned16(w) || !Aligned16(x)) {
    LaunchStepKernel(GemvBf16ScalarKernel, dim3(out), dim3(kScalarGemvThreads), 0, stream, w, out, in, x, rows, y);
    return cudaGetLastError();
  }
  switch (rows) {
    case 1: return LaunchGemvRows<1>(w, out, in, x, y, stream);
    case 2: return LaunchGemvRows<2>(w, out, in, x, y, stream);
    case 3: return LaunchGemvRows<3>(w, out, in, x, y, stream);
    case 4: return LaunchGemvRows<4>(w, out, in, x, y, stream);
    case 5: return LaunchGemvRows<5>(w, out, in, x, y, stream);
    case 6: return LaunchGemvRows<6>(w, out, in, x, y, stream);
    case 7: return LaunchGemvRows<7>(w, out, in, x, y, stream);
    case 8: return LaunchGemvRows<8>(w, out, in, x, y, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace sparkserve::kernels::cuda
