// Skinny linear on tensor cores (9..64 activation rows, one pass over the weights): a block of 8
// warps owns a column block of 16 weight tiles (256 outputs), each warp 2 tiles, and walks its
// stream-K range of (column block, K step) units (skinny_linear_kernels.h). Per K step:
//   1. the block stages the step's raw weights (NVFP4 codes + group scales / FP8 codes, copied
//      verbatim from the tile-major decode layout) and the step's fp16 activations of all rows into
//      one slot of a shared-memory ring with cp.async, stages - 1 steps ahead (rows past `rows` are
//      zero-filled), then one __syncthreads a step makes the slot visible and frees the slot read the
//      step before;
//   2. each warp unpacks its own 2 tiles' A fragments in registers, ONCE per k16 slice (the decode
//      layout is already in fragment order: decode_layout.cuh), and runs one mma.m16n8k16 per tile
//      and 8-row activation tile: every B fragment (one 8-byte shared load) feeds 2 mma and every A
//      fragment up to 8. NVFP4 group scales multiply the fp16 weights exactly, as in the GEMM.
// Why this shape: the decode GEMV re-reads the weights per 8 rows and the GEMM's block-wide
// dequantise-then-sync per 64 K runs 8 warps a SM in lockstep; here the dequantisation stays in
// registers and the only block-wide step is the staging, so at 64 rows the kernel is bound by the
// mma (2 tiles x 8 n-tiles = 16 mma per 36 unpacking instructions and 8 shared loads a k16 slice),
// and at 16 rows by the weight stream (~55 KB in flight a SM). Shared memory a k16 slice and warp:
// 8 x 256 bytes of B fragments + ~600 of weights, below what the mma take to run.
// The activation rows sit 32 bytes apart mod 128 (row stride = step + 16 halves), so the 8-byte
// B loads (lane q, t: row q, bytes 8t of a 32-byte group) of each half-warp hit 16 distinct bank pairs.
#include "kernels/cuda/decode_layout.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/skinny_linear_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = kSkinnyWarps * 32;
constexpr int kMt = kSkinnyWarpTiles;

// Everything the kernel reads, by value.
struct SkinnyArgs {
  const uint8_t* codes;   // NVFP4 packed codes / FP8 weight, decode layout
  const uint8_t* scales;  // NVFP4 group scales, decode layout; unused for FP8
  const __half* x;        // [rows, in]
  int rows, out, in, tiles, steps, stages, planes;
  int64_t units;
  float* partial;         // [planes, rows, out]
};

__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : (i == 1 ? v.y : (i == 2 ? v.z : v.w));
}

// cp.async.wait_group with a run-time count (the ring depth is chosen per device): n in 0..3.
__device__ __forceinline__ void CpAsyncWaitAtMost(int n) {
  switch (n) {
    case 0: CpAsyncWait<0>(); break;
    case 1: CpAsyncWait<1>(); break;
    case 2: CpAsyncWait<2>(); break;
    default: CpAsyncWait<3>(); break;
  }
}

// Activations of K step s, all rows: [NT * 8][kStepK + 16] fp16 (rows >= rows zero).
template <int kStepK, int NT>
__device__ __forceinline__ void StageActivations(const SkinnyArgs& a, int s, uint8_t* dst, int tid) {
  constexpr int kRowChunks = kStepK / 8, kChunks = NT * 8 * kRowChunks, kStrideBytes = (kStepK + 16) * 2;
#pragma unroll
  for (int j = 0; j < (kChunks + kThreads - 1) / kThreads; ++j) {
    const int i = tid + j * kThreads;
    if (kChunks % kThreads == 0 || i < kChunks) {
      const int r = i / kRowChunks, ch = i % kRowChunks;
      const bool valid = r < a.rows;
      const __half* src = a.x + static_cast<size_t>(valid ? r : 0) * a.in + static_cast<size_t>(s) * kStepK + ch * 8;
      CpAsync16(dst + r * kStrideBytes + ch * 16, src, valid);
    }
  }
}

// The weights of one K step of a column block, verbatim from the decode layout: [16 tiles][1024]
// codes (tiles past the last repeat it: their outputs are never stored).
__device__ __forceinline__ void StageCodes(const SkinnyArgs& a, int col_block, int s, uint8_t* dst, int tid) {
  const int tile0 = col_block * kSkinnyBlockTiles;
#pragma unroll
  for (int j = 0; j < kSkinnyBlockTiles * 64 / kThreads; ++j) {
    const int i = tid + j * kThreads, tile = i / 64, ch = i % 64;
    const size_t block = static_cast<size_t>(min(tile0 + tile, a.tiles - 1)) * a.steps + s;
    CpAsync16(dst + tile * 1024 + ch * 16, a.codes + block * 1024 + ch * 16);
  }
}

struct SkinnyNvfp4 {
  static constexpr int kStepK = kNvfp4Step;  // 8 groups of 16
  static constexpr int kCodeBytes = kSkinnyBlockTiles * 1024;
  static constexpr int kWeightBytes = kCodeBytes + kSkinnyBlockTiles * 128;  // + [tile][q][16] scales
  static constexpr int kMaxStages = 4;  // 3 steps in flight: 55 KB a block

  __device__ static void StageWeights(const SkinnyArgs& a, int col_block, int s, uint8_t* dst, int tid) {
    StageCodes(a, col_block, s, dst, tid);
    if (tid < kSkinnyBlockTiles * 8) {
      const int tile = tid / 8, ch = tid % 8;
      const size_t block = static_cast<size_t>(min(col_block * kSkinnyBlockTiles + tile, a.tiles - 1)) * a.steps + s;
      CpAsync16(dst + kCodeBytes + tile * 128 + ch * 16, a.scales + block * 128 + ch * 16);
    }
  }

  // One 128-element K step of the warp's 2 tiles against NT 8-row activation tiles.
  template <int NT>
  __device__ static void Step(const uint8_t* wst, const __half* act, int warp, int lane, float (&acc)[kMt][NT][4]) {
    constexpr int kStride = kStepK + 16;
    const int q = lane / 4, t = lane % 4;
    uint4 ca[kMt], cb[kMt], sc[kMt];
#pragma unroll
    for (int mi = 0; mi < kMt; ++mi) {
      const int tile = warp * kMt + mi;
      ca[mi] = *reinterpret_cast<const uint4*>(wst + tile * 1024 + lane * 16);        // row q
      cb[mi] = *reinterpret_cast<const uint4*>(wst + tile * 1024 + 512 + lane * 16);  // row q + 8
      sc[mi] = *reinterpret_cast<const uint4*>(wst + kCodeBytes + tile * 128 + q * 16);  // x, y: row q; z, w: q + 8
    }
    const __half* xl = act + q * kStride + 4 * t;  // activation row q of n-tile 0, elements 4t..
#pragma unroll
    for (int w = 0; w < 4; ++w) {  // word w: k16 slices 2w (pairs 0, 1) and 2w + 1 (pairs 2, 3)
      uint32_t f[kMt][2][4];
#pragma unroll
      for (int mi = 0; mi < kMt; ++mi) {
        const uint32_t wa = Word(ca[mi], w), wb = Word(cb[mi], w);
        // Group scales 2w (low half) and 2w + 1 (high half) of rows q and q + 8, as fp16 (exact).
        const uint32_t sa = E4m3PairToHalf2Bits(Word(sc[mi], w / 2) >> (16 * (w % 2)));
        const uint32_t sb = E4m3PairToHalf2Bits(Word(sc[mi], 2 + w / 2) >> (16 * (w % 2)));
        const uint32_t sa0 = __byte_perm(sa, 0, 0x1010), sa1 = __byte_perm(sa, 0, 0x3232);
        const uint32_t sb0 = __byte_perm(sb, 0, 0x1010), sb1 = __byte_perm(sb, 0, 0x3232);
        f[mi][0][0] = MulHalf2(E2m1PairScaledDown<0>(wa), sa0);
        f[mi][0][1] = MulHalf2(E2m1PairScaledDown<0>(wb), sb0);
        f[mi][0][2] = MulHalf2(E2m1PairScaledDown<1>(wa), sa0);
        f[mi][0][3] = MulHalf2(E2m1PairScaledDown<1>(wb), sb0);
        f[mi][1][0] = MulHalf2(E2m1PairScaledDown<2>(wa), sa1);
        f[mi][1][1] = MulHalf2(E2m1PairScaledDown<2>(wb), sb1);
        f[mi][1][2] = MulHalf2(E2m1PairScaledDown<3>(wa), sa1);
        f[mi][1][3] = MulHalf2(E2m1PairScaledDown<3>(wb), sb1);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
          const uint2 b = *reinterpret_cast<const uint2*>(xl + ni * 8 * kStride + 16 * (2 * w + h));
#pragma unroll
          for (int mi = 0; mi < kMt; ++mi) {
            MmaF16F32(acc[mi][ni], f[mi][h][0], f[mi][h][1], f[mi][h][2], f[mi][h][3], b.x, b.y);
          }
        }
      }
    }
  }
};

struct SkinnyFp8 {
  static constexpr int kStepK = kFp8Step;  // 4 k16 slices
  static constexpr int kWeightBytes = kSkinnyBlockTiles * 1024;
  static constexpr int kMaxStages = 5;  // 4 steps in flight: 64 KB a block

  __device__ static void StageWeights(const SkinnyArgs& a, int col_block, int s, uint8_t* dst, int tid) {
    StageCodes(a, col_block, s, dst, tid);
  }

  // Word g of a lane's 16 bytes holds k16 slice g: elements 4t..4t+3 (e4m3 is exact in fp16).
  template <int NT>
  __device__ static void Step(const uint8_t* wst, const __half* act, int warp, int lane, float (&acc)[kMt][NT][4]) {
    constexpr int kStride = kStepK + 16;
    const int q = lane / 4, t = lane % 4;
    uint4 ca[kMt], cb[kMt];
#pragma unroll
    for (int mi = 0; mi < kMt; ++mi) {
      const int tile = warp * kMt + mi;
      ca[mi] = *reinterpret_cast<const uint4*>(wst + tile * 1024 + lane * 16);
      cb[mi] = *reinterpret_cast<const uint4*>(wst + tile * 1024 + 512 + lane * 16);
    }
    const __half* xl = act + q * kStride + 4 * t;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      uint32_t f[kMt][4];
#pragma unroll
      for (int mi = 0; mi < kMt; ++mi) {
        const uint32_t wa = Word(ca[mi], g), wb = Word(cb[mi], g);
        f[mi][0] = E4m3PairToHalf2Bits(wa);
        f[mi][1] = E4m3PairToHalf2Bits(wb);
        f[mi][2] = E4m3PairToHalf2Bits(wa >> 16);
        f[mi][3] = E4m3PairToHalf2Bits(wb >> 16);
      }
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
        const uint2 b = *reinterpret_cast<const uint2*>(xl + ni * 8 * kStride + 16 * g);
#pragma unroll
        for (int mi = 0; mi < kMt; ++mi) MmaF16F32(acc[mi][ni], f[mi][0], f[mi][1], f[mi][2], f[mi][3], b.x, b.y);
      }
    }
  }
};

// Plane `plane` of the warp's 2 tiles from tile `tile` on: acc[mi][ni] = (output m, activation row n):
// c0 (m, n), c1 (m, n + 1), c2 (m + 8, n), c3 (m + 8, n + 1), m = (tile + mi) * 16 + q, n = 8 ni + 2t.
// Zeros instead when `zero`. Rows >= rows and outputs >= out are dropped.
template <int NT>
__device__ __forceinline__ void StorePlane(const float (&acc)[kMt][NT][4], const SkinnyArgs& a, int plane, int tile,
                                           int lane, bool zero) {
  float* dst = a.partial + static_cast<size_t>(plane) * a.rows * a.out;
  const int q = lane / 4, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < kMt; ++mi) {
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int m = (tile + mi) * 16 + q + (c >= 2 ? 8 : 0), n = ni * 8 + 2 * t + (c & 1);
        if (n < a.rows && m < a.out) dst[static_cast<size_t>(n) * a.out + m] = zero ? 0.f : acc[mi][ni][c];
      }
    }
  }
}

// grid: PlanSkinny's grid (one wave); block: 256; dynamic shared memory: stages x stage bytes.
template <typename F, int NT>
__global__ void __launch_bounds__(kThreads, SkinnyMinBlocksPerSm(NT)) SkinnyLinearKernel(const SkinnyArgs a) {
  constexpr size_t kStageBytes = F::kWeightBytes + static_cast<size_t>(NT) * 8 * (F::kStepK + 16) * 2;
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int S = a.stages;  // 2..F::kMaxStages
  const int64_t grid = gridDim.x, b = blockIdx.x;
  const int64_t u0 = StreamKUnitBegin(b, a.units, grid);
  const int n = static_cast<int>(StreamKUnitBegin(b + 1, a.units, grid) - u0);  // >= 1: grid <= units
  auto slot_base = [&](int slot) { return smem + static_cast<size_t>(slot) * kStageBytes; };
  auto stage_weights = [&](int i, int slot) {  // unit u0 + i
    const int64_t u = u0 + i;
    F::StageWeights(a, static_cast<int>(u / a.steps), static_cast<int>(u % a.steps), slot_base(slot), tid);
  };
  auto stage_activations = [&](int i, int slot) {
    StageActivations<F::kStepK, NT>(a, static_cast<int>((u0 + i) % a.steps), slot_base(slot) + F::kWeightBytes, tid);
  };

  // The first steps' weights (no earlier kernel writes them) load while the previous kernel drains.
  for (int i = 0; i < S - 1 && i < n; ++i) stage_weights(i, i);
  WaitForPriorGrids();  // x, and the workspace an earlier epilogue may still read
  AllowNextGrid();
  for (int i = 0; i < S - 1; ++i) {  // group i: activations of step i (group 0 also the weights above)
    if (i < n) stage_activations(i, i);
    CpAsyncCommit();
  }

  float acc[kMt][NT][4];
#pragma unroll
  for (int mi = 0; mi < kMt; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

  int slot = 0;  // i % S
  for (int i = 0; i < n; ++i) {
    CpAsyncWaitAtMost(S - 2);  // this thread's groups 0..i are complete (S - 1 + i committed)
    // Everyone's copies of step i are visible, and every warp is past step i - 1 (its slot is free).
    __syncthreads();
    if (i + S - 1 < n) {
      const int ahead = slot == 0 ? S - 1 : slot - 1;  // (i + S - 1) % S: step i - 1's slot
      stage_weights(i + S - 1, ahead);
      stage_activations(i + S - 1, ahead);
    }
    CpAsyncCommit();  // (possibly empty) group i + S - 1, so the count above stays exact
    const uint8_t* st = slot_base(slot);
    F::template Step<NT>(st, reinterpret_cast<const __half*>(st + F::kWeightBytes), warp, lane, acc);
    slot = slot + 1 == S ? 0 : slot + 1;

    const int64_t u = u0 + i;
    const bool col_end = u % a.steps == a.steps - 1;
    if (col_end || i == n - 1) {  // this block's piece of column block c is complete
      const int64_t c = u / a.steps;
      const int piece = static_cast<int>(b - StreamKBlockOfUnit(c * a.steps, a.units, grid));
      const int tile = static_cast<int>(c) * kSkinnyBlockTiles + warp * kMt;
      StorePlane<NT>(acc, a, piece, tile, lane, false);
      if (col_end) {  // the column block's last piece: the planes no piece reaches hold zeros
        for (int p = piece + 1; p < a.planes; ++p) StorePlane<NT>(acc, a, p, tile, lane, true);
      }
#pragma unroll
      for (int mi = 0; mi < kMt; ++mi)
#pragma unroll
        for (int ni = 0; ni < NT; ++ni)
#pragma unroll
          for (int c2 = 0; c2 < 4; ++c2) acc[mi][ni][c2] = 0.f;
    }
  }
}

template <typename F, int NT>
cudaError_t LaunchKernel(const SkinnyArgs& a, const SkinnyPlan& p, cudaStream_t stream) {
  constexpr auto kernel = SkinnyLinearKernel<F, NT>;
  // The device's whole per-block limit, so every plan fits.
  const cudaError_t err = AllowDynamicSharedMemory<kernel>(DeviceSharedMemory().per_block);
  if (err != cudaSuccess) return err;
  return LaunchStepKernel(kernel, dim3(static_cast<unsigned>(p.grid)), dim3(kThreads), p.smem, stream, a);
}

template <typename F>
cudaError_t LaunchThenEpilogue(SkinnyArgs a, float* y, const DecodeEpilogue& e, float scale, const float* row_scales,
                               const float* row_divisors, cudaStream_t stream) {
  const SkinnyPlan p = PlanSkinny(std::is_same_v<F, SkinnyNvfp4>, a.rows, a.out, a.in);
  a.tiles = p.tiles;
  a.steps = p.steps;
  a.stages = p.stages;
  a.planes = p.planes;
  a.units = p.units;
  cudaError_t err = cudaSuccess;
  switch (p.n_tiles) {
    case 1: err = LaunchKernel<F, 1>(a, p, stream); break;
    case 2: err = LaunchKernel<F, 2>(a, p, stream); break;
    case 3: err = LaunchKernel<F, 3>(a, p, stream); break;
    case 4: err = LaunchKernel<F, 4>(a, p, stream); break;
    case 5: err = LaunchKernel<F, 5>(a, p, stream); break;
    case 6: err = LaunchKernel<F, 6>(a, p, stream); break;
    case 7: err = LaunchKernel<F, 7>(a, p, stream); break;
    default: err = LaunchKernel<F, 8>(a, p, stream); break;
  }
  if (err != cudaSuccess) return err;
  const SplitSum sum{a.partial, p.planes, a.rows, a.out, scale, row_scales, row_divisors};
  return LaunchLinearEpilogue(sum, y, e, stream);
}

}  // namespace

SkinnyPlan PlanSkinny(bool nvfp4, int rows, int out, int in) {
  SkinnyPlan p{};
  const int step_k = nvfp4 ? SkinnyNvfp4::kStepK : SkinnyFp8::kStepK;
  const int max_stages = nvfp4 ? SkinnyNvfp4::kMaxStages : SkinnyFp8::kMaxStages;
  p.n_tiles = std::clamp((rows + 7) / 8, 1, kMaxSkinnyRows / 8);
  p.tiles = (out + 15) / 16;
  p.col_blocks = (p.tiles + kSkinnyBlockTiles - 1) / kSkinnyBlockTiles;
  p.steps = in / step_k;
  p.units = static_cast<int64_t>(p.col_blocks) * p.steps;
  p.stage_bytes = static_cast<size_t>(nvfp4 ? SkinnyNvfp4::kWeightBytes : SkinnyFp8::kWeightBytes) +
                  static_cast<size_t>(p.n_tiles) * 8 * (step_k + 16) * 2;
  // As many ring stages as the blocks a SM aims for leave room for (1 KB a block is the runtime's);
  // one block a SM when two do not fit two stages each.
  const SharedMemoryLimits& lim = DeviceSharedMemory();
  p.blocks_per_sm = SkinnyMinBlocksPerSm(p.n_tiles);
  for (;;) {
    const int64_t budget = std::min<int64_t>(lim.per_block, lim.per_sm / p.blocks_per_sm - 1024);
    p.stages = static_cast<int>(std::clamp<int64_t>(budget / static_cast<int64_t>(p.stage_bytes), 2, max_stages));
    if (budget >= 2 * static_cast<int64_t>(p.stage_bytes) || p.blocks_per_sm == 1) break;
    p.blocks_per_sm = 1;
  }
  p.smem = static_cast<size_t>(p.stages) * p.stage_bytes;
  p.grid = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(MultiprocessorCount()) * p.blocks_per_sm, 1,
                                                std::max<int64_t>(p.units, 1)));
  p.planes = StreamKPlanes(p.col_blocks, p.steps, p.grid);
  return p;
}

cudaError_t LaunchNvfp4Skinny(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              const DecodeEpilogue& epilogue, cudaStream_t stream) {
  SkinnyArgs a{};
  a.codes = w.packed;
  a.scales = w.scales;
  a.x = x;
  a.rows = rows;
  a.out = w.out;
  a.in = w.in;
  a.partial = partial;
  return LaunchThenEpilogue<SkinnyNvfp4>(a, y, epilogue, Nvfp4SumScale(w), nullptr, w.row_global_scales, stream);
}

cudaError_t LaunchFp8Skinny(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            const DecodeEpilogue& epilogue, cudaStream_t stream) {
  SkinnyArgs a{};
  a.codes = w.weight;
  a.x = x;
  a.rows = rows;
  a.out = w.out;
  a.in = w.in;
  a.partial = partial;
  return LaunchThenEpilogue<SkinnyFp8>(a, y, epilogue, 1.0f, w.scales, nullptr, stream);
}

}  // namespace sparkserve::kernels::cuda
