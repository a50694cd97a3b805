// The two GEMM kernels' (gemm_linear.cu: mma.sync, gemm_wgmma.cu: sm_90a wgmma) common pieces: the
// arguments, the NVFP4 / FP8 weight formats (staging one 64-element K stage of a block's weight tiles
// in shared memory, and dequantising it into fp16 mma A fragments) and the output store. nvcc only.
//
// A stage's A fragments come in two K orders. The decode layout's (Dequantise): mma k-slots 2t, 2t+1,
// 2t+8, 2t+9 of a k16 slice hold elements 4t..4t+3, so a thread of the mma.sync kernel reads its
// activations with one 8-byte load. The natural order (DequantiseNatural): k-slot j holds element j,
// as wgmma needs when it reads the activations from shared memory itself; lane (q, t) then gathers
// its elements from the staged words of lanes (q, t / 2) and (q, t / 2 + 2).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/decode_layout.cuh"
#include "kernels/cuda/gemm_linear_kernels.h"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {

// Everything a GEMM kernel reads, by value.
struct GemmArgs {
  const uint8_t* codes;   // NVFP4 packed codes / FP8 weight, repacked for decode
  const uint8_t* scales;  // NVFP4 group scales (decode layout); unused for FP8
  const __half* x;        // [rows, in]
  int rows, out, in, tiles, stages_per_split;
  float* dst;             // direct: y [rows, out]; else partials [num_splits, rows, out]
  bool direct;            // scale the sums here (one split, kStore)
  float scale;            // SplitSum's scale semantics (linear_epilogue_kernels.h)
  const float* row_scales;
  const float* row_divisors;
  // Fused SwiGLU (wgmma kernel only; out = 2F, F % 128 == 0, one split): the block's second half of
  // tiles lies up_tile_offset tiles further on (the up rows of the same outputs as the gate half),
  // and swiglu_out [rows, F] f16 gets silu(gate) * up instead of dst. Else nullptr and 0.
  __half* swiglu_out;
  int up_tile_offset;

  // Weight tile of a block's local tile j (of kTiles) when its first is tile0.
  __device__ __forceinline__ int Tile(int tile0, int j, int kTiles) const {
    return min(tile0 + j + (j >= kTiles / 2 ? up_tile_offset : 0), tiles - 1);
  }
  // The factor output m's sum is scaled by.
  __device__ __forceinline__ float OutputScale(int m) const {
    return row_divisors ? scale / row_divisors[m] : (row_scales ? row_scales[m] : scale);
  }
};

// Writes output m of activation row n: scaled when direct, else the raw partial of split `split`.
__device__ __forceinline__ void GemmStore(const GemmArgs& a, int split, float v, int n, int m) {
  if (n >= a.rows || m >= a.out) return;
  if (a.direct) v *= a.OutputScale(m);
  a.dst[(a.direct ? size_t{0} : static_cast<size_t>(split) * a.rows * a.out) + static_cast<size_t>(n) * a.out + m] = v;
}

// The K stages block (x, y, z) multiplies: [begin, begin + num) of split z (num >= 1: PlanGemm).
struct GemmKRange {
  int begin, num;
};
__device__ __forceinline__ GemmKRange BlockKRange(const GemmArgs& a) {
  const int begin = static_cast<int>(blockIdx.z) * a.stages_per_split;
  return {begin, min(a.in / kGemmStageK, begin + a.stages_per_split) - begin};
}

// A block's copies of BN activation rows x one 64-element K stage: each thread copies kChunks
// consecutive 16-byte chunks of one row, to offset(row, chunk) of the stage's buffer (each kernel
// its own swizzle). Rows past the end repeat the last row (their outputs are never stored).
template <int BN, int kThreads>
struct GemmActivationCopy {
  static constexpr int kChunks = BN * 8 / kThreads;
  int row, chunk;
  const __half* src;

  __device__ GemmActivationCopy(const GemmArgs& a, int n0, int tid)
      : row(tid / (8 / kChunks)),
        chunk((tid % (8 / kChunks)) * kChunks),
        src(a.x + static_cast<size_t>(min(n0 + row, a.rows - 1)) * a.in + chunk * 8) {}

  template <typename Offset>
  __device__ __forceinline__ void Stage(uint8_t* dst, int k_stage, Offset offset) const {
    const __half* s = src + k_stage * kGemmStageK;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) CpAsync16(dst + offset(row, chunk + j), s + j * 8);
  }
};

// The pipeline prologue of both kernels: the first S - 1 stages' weights (no earlier kernel writes
// them) load while the previous kernel drains; after the PDL wait their activations, one cp.async
// group a stage (group 0 also holds the weights). stage_weights(i) / stage_activations(i) copy stage i.
template <int S, typename StageWeights, typename StageActivations>
__device__ __forceinline__ void GemmPrologue(int num, StageWeights&& stage_weights,
                                             StageActivations&& stage_activations) {
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < num) stage_weights(i);
  }
  WaitForPriorGrids();
  AllowNextGrid();
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < num) stage_activations(i);
    CpAsyncCommit();
  }
}

// NVFP4: a stage is half of a 128-element decode step: words 2*half, 2*half+1 of every lane's 16
// bytes (groups 4*half..4*half+3), and the matching 4 group scales of each row.
// Shared layout of a stage: codes [tile][row half h][lane] 8 bytes, then scales [tile][q][h] 4 bytes.
template <int kTiles, int kThreads>
struct Nvfp4Format {
  static constexpr int kCodeBytes = kTiles * 512;
  static constexpr int kStageBytes = kCodeBytes + kTiles * 64;
  static_assert(kTiles * 64 % kThreads == 0 && kTiles * 16 <= kThreads, "whole copies a thread");

  __device__ static void Stage(const GemmArgs& a, int tile0, int kt, uint8_t* dst, int tid) {
    const int steps = a.in / kNvfp4Step, s = kt / 2, half = kt % 2;
#pragma unroll
    for (int j = 0; j < kTiles * 64 / kThreads; ++j) {
      const int i = tid + j * kThreads, tile = i / 64, h = (i / 32) % 2, lane = i % 32;
      const size_t block = static_cast<size_t>(a.Tile(tile0, tile, kTiles)) * steps + s;
      CpAsync8(dst + tile * 512 + h * 256 + lane * 8, a.codes + block * 1024 + h * 512 + lane * 16 + half * 8);
    }
    if (tid < kTiles * 16) {
      const int tile = tid / 16, q = (tid / 2) % 8, h = tid % 2;
      const size_t block = static_cast<size_t>(a.Tile(tile0, tile, kTiles)) * steps + s;
      CpAsync4(dst + kCodeBytes + tile * 64 + q * 8 + h * 4, a.scales + block * 128 + q * 16 + h * 8 + half * 4);
    }
  }

  // Thread (tile, lane): the decode-order A fragments of its rows q, q + 8 for the stage's 4 k16
  // slices, into frag [tile][slice][lane]. Each fp16 weight is e2m1 * 2^-14 * group scale: the exact
  // product is a multiple of 2^-24 (e2m1 a multiple of 0.5, e4m3 of 2^-9) below 6 * 448 * 2^-14, so
  // fp16 holds it exactly (subnormals included) and the 2^-14 comes back in the epilogue's
  // 16384 / global_scale.
  __device__ static void Dequantise(const uint8_t* src, uint4* frag, int tile, int lane) {
    const int q = lane / 4;
    const uint2 c0 = *reinterpret_cast<const uint2*>(src + tile * 512 + lane * 8);        // row q
    const uint2 c1 = *reinterpret_cast<const uint2*>(src + tile * 512 + 256 + lane * 8);  // row q + 8
    const uint2 sc = *reinterpret_cast<const uint2*>(src + kCodeBytes + tile * 64 + q * 8);
    uint4* f = frag + tile * 4 * 32 + lane;
#pragma unroll
    for (int w = 0; w < 2; ++w) {  // word w: pairs 0, 1 of group (slice) 2w, pairs 2, 3 of group 2w + 1
      const uint32_t u0 = w ? c0.y : c0.x, u1 = w ? c1.y : c1.x;
      const uint32_t s0 = E4m3PairToHalf2Bits(sc.x >> (16 * w)), s1 = E4m3PairToHalf2Bits(sc.y >> (16 * w));
      const uint32_t s0a = __byte_perm(s0, 0, 0x1010), s0b = __byte_perm(s0, 0, 0x3232);
      const uint32_t s1a = __byte_perm(s1, 0, 0x1010), s1b = __byte_perm(s1, 0, 0x3232);
      f[(2 * w) * 32] = make_uint4(MulHalf2(E2m1PairScaledDown<0>(u0), s0a), MulHalf2(E2m1PairScaledDown<0>(u1), s1a),
                                   MulHalf2(E2m1PairScaledDown<1>(u0), s0a), MulHalf2(E2m1PairScaledDown<1>(u1), s1a));
      f[(2 * w + 1) * 32] =
          make_uint4(MulHalf2(E2m1PairScaledDown<2>(u0), s0b), MulHalf2(E2m1PairScaledDown<2>(u1), s1b),
                     MulHalf2(E2m1PairScaledDown<3>(u0), s0b), MulHalf2(E2m1PairScaledDown<3>(u1), s1b));
    }
  }

  // Thread (tile, lane = 4q + t): the natural-order A fragments a[slice][0..3] of the stage. Element
  // pair (2t, 2t + 1) of a slice is pair t % 2 (slice 2w) or 2 + t % 2 (slice 2w + 1) of word w of
  // lane (q, t / 2); pair (2t + 8, 2t + 9) the same pair of lane (q, t / 2 + 2).
  __device__ static void DequantiseNatural(const uint8_t* src, int tile, int lane, uint32_t (&a)[4][4]) {
    const int q = lane / 4, t = lane % 4, odd = t & 1;
    const uint8_t* codes = src + tile * 512 + (q * 4 + t / 2) * 8;
    const uint2 x0 = *reinterpret_cast<const uint2*>(codes);             // row q, pairs (2t, 2t + 1)
    const uint2 y0 = *reinterpret_cast<const uint2*>(codes + 16);        // row q, pairs (2t + 8, 2t + 9)
    const uint2 x1 = *reinterpret_cast<const uint2*>(codes + 256);       // row q + 8
    const uint2 y1 = *reinterpret_cast<const uint2*>(codes + 256 + 16);
    const uint2 sc = *reinterpret_cast<const uint2*>(src + kCodeBytes + tile * 64 + q * 8);
    // E2m1PairScaledDown<K> for K = odd (slices 2w) and K = 2 + odd (slices 2w + 1) with the shifts
    // taken at run time: magnitude to bits 9..11 (<< 9 - 3K), sign to bit 15 (<< 1 + K; K = 3: none).
    const int mag_shift = 9 - 3 * odd, sign_shift = 1 + odd, high_shift = 3 - 3 * odd;
    auto first = [&](uint32_t w) { return ((w << mag_shift) & 0x0E000E00u) | ((w << sign_shift) & 0x80008000u); };
    auto second = [&](uint32_t w) { return (w << high_shift) & 0x8E008E00u; };
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t ux0 = w ? x0.y : x0.x, uy0 = w ? y0.y : y0.x, ux1 = w ? x1.y : x1.x, uy1 = w ? y1.y : y1.x;
      const uint32_t s0 = E4m3PairToHalf2Bits(sc.x >> (16 * w)), s1 = E4m3PairToHalf2Bits(sc.y >> (16 * w));
      const uint32_t s0a = __byte_perm(s0, 0, 0x1010), s0b = __byte_perm(s0, 0, 0x3232);
      const uint32_t s1a = __byte_perm(s1, 0, 0x1010), s1b = __byte_perm(s1, 0, 0x3232);
      uint32_t(&lo)[4] = a[2 * w];
      lo[0] = MulHalf2(first(ux0), s0a);
      lo[1] = MulHalf2(first(ux1), s1a);
      lo[2] = MulHalf2(first(uy0), s0a);
      lo[3] = MulHalf2(first(uy1), s1a);
      uint32_t(&hi)[4] = a[2 * w + 1];
      hi[0] = MulHalf2(second(ux0), s0b);
      hi[1] = MulHalf2(second(ux1), s1b);
      hi[2] = MulHalf2(second(uy0), s0b);
      hi[3] = MulHalf2(second(uy1), s1b);
    }
  }
};

// FP8: a stage is one 64-element decode step, 1024 bytes a tile, copied as is: [tile][row half][lane]
// 16 bytes, word g of a lane's 16 bytes = k16 slice g, bytes = elements 4t..4t+3 (exact in fp16).
template <int kTiles, int kThreads>
struct Fp8Format {
  static constexpr int kStageBytes = kTiles * 1024;
  static_assert(kTiles * 64 % kThreads == 0, "whole copies a thread");

  __device__ static void Stage(const GemmArgs& a, int tile0, int kt, uint8_t* dst, int tid) {
    const int steps = a.in / kFp8Step;
#pragma unroll
    for (int j = 0; j < kTiles * 64 / kThreads; ++j) {
      const int i = tid + j * kThreads, tile = i / 64, chunk = i % 64;
      const size_t block = static_cast<size_t>(a.Tile(tile0, tile, kTiles)) * steps + kt;
      CpAsync16(dst + tile * 1024 + chunk * 16, a.codes + block * 1024 + chunk * 16);
    }
  }

  __device__ static void Dequantise(const uint8_t* src, uint4* frag, int tile, int lane) {
    const uint4 c0 = *reinterpret_cast<const uint4*>(src + tile * 1024 + lane * 16);        // row q
    const uint4 c1 = *reinterpret_cast<const uint4*>(src + tile * 1024 + 512 + lane * 16);  // row q + 8
    const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
    uint4* f = frag + tile * 4 * 32 + lane;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      f[g * 32] = make_uint4(E4m3PairToHalf2Bits(w0[g]), E4m3PairToHalf2Bits(w1[g]), E4m3PairToHalf2Bits(w0[g] >> 16),
                             E4m3PairToHalf2Bits(w1[g] >> 16));
    }
  }

  // Natural order: elements (2t, 2t + 1) are bytes 2 (t % 2).. of lane (q, t / 2)'s word g,
  // (2t + 8, 2t + 9) the same bytes of lane (q, t / 2 + 2).
  __device__ static void DequantiseNatural(const uint8_t* src, int tile, int lane, uint32_t (&a)[4][4]) {
    const int q = lane / 4, t = lane % 4, shift = 16 * (t & 1);
    const uint8_t* codes = src + tile * 1024 + (q * 4 + t / 2) * 16;
    const uint4 x0 = *reinterpret_cast<const uint4*>(codes), y0 = *reinterpret_cast<const uint4*>(codes + 32);
    const uint4 x1 = *reinterpret_cast<const uint4*>(codes + 512), y1 = *reinterpret_cast<const uint4*>(codes + 512 + 32);
    const uint32_t wx0[4] = {x0.x, x0.y, x0.z, x0.w}, wy0[4] = {y0.x, y0.y, y0.z, y0.w};
    const uint32_t wx1[4] = {x1.x, x1.y, x1.z, x1.w}, wy1[4] = {y1.x, y1.y, y1.z, y1.w};
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      a[g][0] = E4m3PairToHalf2Bits(wx0[g] >> shift);
      a[g][1] = E4m3PairToHalf2Bits(wx1[g] >> shift);
      a[g][2] = E4m3PairToHalf2Bits(wy0[g] >> shift);
      a[g][3] = E4m3PairToHalf2Bits(wy1[g] >> shift);
    }
  }
};

// The sm_90a kernel's launchers (gemm_wgmma.cu); the plan's block_rows picks its shape.
cudaError_t LaunchNvfp4GemmWgmma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream);
cudaError_t LaunchFp8GemmWgmma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
