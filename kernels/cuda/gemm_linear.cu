// GEMM linear on tensor cores for many activation rows, reading the decode kernels' tile-major
// weights (decode_linear.h). A block of 8 warps owns 8 weight tiles (128 outputs) x block_rows
// (32/64/128) activation rows over a range of K; per 64-element K stage it
//   1. stages the raw weight codes (+ NVFP4 group scales) and the fp16 activations in shared
//      memory with cp.async, 3-4 stages ahead;
//   2. dequantises the stage's weights once into fp16 mma A fragments in shared memory (each of the
//      256 threads one (tile, lane): the repacked layout is already in fragment order);
//   3. runs mma.m16n8k16 (fp16 in, fp32 accumulate): every warp reads its A fragments with one
//      16-byte load per tile and k16 slice, and its activations with one 8-byte load per 8 rows.
// K order inside each k16 slice follows the repacked layout (mma k-slots 2t, 2t+1, 2t+8, 2t+9 hold
// elements 4t..4t+3); the activations are read in the same order, so the product is unchanged.
// NVFP4 group scales multiply the fp16 weights exactly (see Nvfp4Format::Dequantise); the global scale and
// FP8's per-channel scales are applied after the sum, as in the decode kernels.
#include "kernels/cuda/decode_layout.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/gemm_linear_kernels.h"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps; the dequantisation gives each thread one (tile, lane)
constexpr int kTiles = kGemmTilesPerBlock;
constexpr int kFragBytes = kTiles * 4 * 32 * 16;  // A fragments of one stage: [tile][k16 slice][lane] 16 B

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
};

// ---- the two weight formats: staging one K stage of 8 tiles, and dequantising it ----

// NVFP4: a stage is half of a 128-element decode step: words 2*half, 2*half+1 of every lane's 16
// bytes (groups 4*half..4*half+3), and the matching 4 group scales of each row.
struct Nvfp4Format {
  static constexpr int kCodeBytes = kTiles * 512;  // [tile][h][lane] 8 bytes
  static constexpr int kStageBytes = kCodeBytes + kTiles * 64;  // + scales [tile][q][h] 4 bytes

  __device__ static void Stage(const GemmArgs& a, int tile0, int kt, uint8_t* dst, int tid) {
    const int steps = a.in / kNvfp4Step, s = kt / 2, half = kt % 2;
#pragma unroll
    for (int j = 0; j < kTiles * 64 / kThreads; ++j) {
      const int i = tid + j * kThreads, tile = i / 64, h = (i / 32) % 2, lane = i % 32;
      const size_t block = static_cast<size_t>(min(tile0 + tile, a.tiles - 1)) * steps + s;
      CpAsync8(dst + tile * 512 + h * 256 + lane * 8, a.codes + block * 1024 + h * 512 + lane * 16 + half * 8);
    }
    if (tid < kTiles * 16) {
      const int tile = tid / 16, q = (tid / 2) % 8, h = tid % 2;
      const size_t block = static_cast<size_t>(min(tile0 + tile, a.tiles - 1)) * steps + s;
      CpAsync4(dst + kCodeBytes + tile * 64 + q * 8 + h * 4, a.scales + block * 128 + q * 16 + h * 8 + half * 4);
    }
  }

  // Thread (tile = warp, lane): the A fragments of its rows q, q + 8 for the stage's 4 k16 slices.
  // Each fp16 weight is e2m1 * 2^-14 * group scale: the exact product is a multiple of 2^-24 (e2m1
  // a multiple of 0.5, e4m3 of 2^-9) below 6 * 448 * 2^-14, so fp16 holds it exactly (subnormals
  // included) and the 2^-14 comes back in the epilogue's 16384 / global_scale.
  __device__ static void Dequantise(const uint8_t* src, uint4* frag, int warp, int lane) {
    const int q = lane / 4;
    const uint2 c0 = *reinterpret_cast<const uint2*>(src + warp * 512 + lane * 8);        // row q
    const uint2 c1 = *reinterpret_cast<const uint2*>(src + warp * 512 + 256 + lane * 8);  // row q + 8
    const uint2 sc = *reinterpret_cast<const uint2*>(src + kCodeBytes + warp * 64 + q * 8);
    uint4* f = frag + warp * 4 * 32 + lane;
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
};

// FP8: a stage is one 64-element decode step, 1024 bytes a tile, copied as is.
struct Fp8Format {
  static constexpr int kStageBytes = kTiles * 1024;

  __device__ static void Stage(const GemmArgs& a, int tile0, int kt, uint8_t* dst, int tid) {
    const int steps = a.in / kFp8Step;
#pragma unroll
    for (int j = 0; j < kTiles * 64 / kThreads; ++j) {
      const int i = tid + j * kThreads, tile = i / 64, chunk = i % 64;
      const size_t block = static_cast<size_t>(min(tile0 + tile, a.tiles - 1)) * steps + kt;
      CpAsync16(dst + tile * 1024 + chunk * 16, a.codes + block * 1024 + chunk * 16);
    }
  }

  // Word g of a lane's 16 bytes holds k16 slice g: bytes = elements 4t..4t+3 (exact in fp16).
  __device__ static void Dequantise(const uint8_t* src, uint4* frag, int warp, int lane) {
    const uint4 c0 = *reinterpret_cast<const uint4*>(src + warp * 1024 + lane * 16);        // row q
    const uint4 c1 = *reinterpret_cast<const uint4*>(src + warp * 1024 + 512 + lane * 16);  // row q + 8
    const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
    uint4* f = frag + warp * 4 * 32 + lane;
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      f[g * 32] = make_uint4(E4m3PairToHalf2Bits(w0[g]), E4m3PairToHalf2Bits(w1[g]), E4m3PairToHalf2Bits(w0[g] >> 16),
                             E4m3PairToHalf2Bits(w1[g] >> 16));
    }
  }
};

// Warp arrangement for block_rows BN: every warp computes kMT 16-row tiles x 32 activation rows.
template <int BN>
struct BlockShape {
  static constexpr int kWarpsN = BN / 32;                 // 1, 2, 4
  static constexpr int kWarpsM = 8 / kWarpsN;             // 8, 4, 2
  static constexpr int kMT = kTiles / kWarpsM;            // 1, 2, 4
  static constexpr int kNT = 4;                           // 8-row groups of activations a warp
  static constexpr int kStages = BN == 128 ? 3 : 4;       // cp.async stages in flight
  static constexpr int kActBytes = BN * kGemmStageK * 2;  // [BN][64] fp16 a stage, 128 bytes a row
  static constexpr int kUnrollSlices = BN == 128 ? 1 : 4;
  static_assert(kWarpsN * kWarpsM == 8 && kMT * kWarpsM == kTiles, "8 warps cover the block");
};

template <typename Format, int BN>
constexpr size_t GemmSharedBytes() {
  using Shape = BlockShape<BN>;
  return static_cast<size_t>(Shape::kStages) * (Shape::kActBytes + Format::kStageBytes) + kFragBytes;
}

// Activation row r's 16-byte chunk c (8 K elements) sits at chunk c ^ 2 (r % 4) of its 128-byte row:
// the 8-byte fragment loads of rows q = 0..3 (one half-warp) then hit 16 distinct 8-byte bank pairs.
__device__ __forceinline__ int ActOffset(int r, int chunk) { return r * 128 + ((chunk ^ ((r & 3) << 1)) * 16); }

// grid: (m_blocks, n_blocks, num_splits); block: 256; dynamic shared memory GemmSharedBytes.
template <typename Format, int BN>
__global__ void __launch_bounds__(kThreads, 2) GemmLinearKernel(const GemmArgs a) {
  using Shape = BlockShape<BN>;
  constexpr int S = Shape::kStages;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* act_s = smem;                                        // [S][BN rows][128 bytes]
  uint8_t* raw_s = smem + S * Shape::kActBytes;                 // [S][Format::kStageBytes]
  uint4* frag_s = reinterpret_cast<uint4*>(raw_s + S * Format::kStageBytes);  // [8][4][32]

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int q = lane / 4, t = lane % 4;
  const int tile0 = static_cast<int>(blockIdx.x) * kTiles;
  const int n0 = static_cast<int>(blockIdx.y) * BN;
  const int k_begin = static_cast<int>(blockIdx.z) * a.stages_per_split;
  const int num = min(a.in / kGemmStageK, k_begin + a.stages_per_split) - k_begin;  // >= 1 (PlanGemm)

  // Each thread copies kChunks consecutive 16-byte chunks of one activation row a stage.
  constexpr int kChunks = BN * 8 / kThreads;
  const int act_r = tid / (8 / kChunks), act_chunk = (tid % (8 / kChunks)) * kChunks;
  // Rows past the end repeat the last row (their outputs are never stored).
  const __half* act_src = a.x + static_cast<size_t>(min(n0 + act_r, a.rows - 1)) * a.in + act_chunk * 8;
  auto stage_activations = [&](int i) {
    uint8_t* dst = act_s + (i % S) * Shape::kActBytes;
    const int k0 = (k_begin + i) * kGemmStageK;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) CpAsync16(dst + ActOffset(act_r, act_chunk + j), act_src + k0 + j * 8);
  };

  // The first stages' weights (no earlier kernel writes them) load while the previous kernel drains.
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {
    if (i < num) Format::Stage(a, tile0, k_begin + i, raw_s + i * Format::kStageBytes, tid);
  }
  WaitForPriorGrids();
  AllowNextGrid();
#pragma unroll
  for (int i = 0; i < S - 1; ++i) {  // group i: activations of stage i (group 0 also the weights above)
    if (i < num) stage_activations(i);
    CpAsyncCommit();
  }

  const int warp_m = warp % Shape::kWarpsM, warp_n = warp / Shape::kWarpsM;
  float acc[Shape::kMT][Shape::kNT][4];
#pragma unroll
  for (int mi = 0; mi < Shape::kMT; ++mi)
#pragma unroll
    for (int ni = 0; ni < Shape::kNT; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

  for (int i = 0; i < num; ++i) {
    CpAsyncWait<S - 2>();  // groups 0..i complete: stage i is in shared memory
    // Stage i visible to all; every warp is past stage i - 1's mma (frag_s and buffer (i - 1) % S free).
    __syncthreads();
    const int ahead = i + S - 1;
    if (ahead < num) {
      Format::Stage(a, tile0, k_begin + ahead, raw_s + (ahead % S) * Format::kStageBytes, tid);
      stage_activations(ahead);
    }
    CpAsyncCommit();  // (possibly empty) group `ahead`, so the count above stays exact
    Format::Dequantise(raw_s + (i % S) * Format::kStageBytes, frag_s, warp, lane);
    __syncthreads();  // the fragments are written

    const uint8_t* act = act_s + (i % S) * Shape::kActBytes;
    // Unrolled the next slice's loads would be hoisted over this one's mma: past 128 registers at 128 rows.
#pragma unroll(Shape::kUnrollSlices)
    for (int slice = 0; slice < 4; ++slice) {
      uint4 af[Shape::kMT];
#pragma unroll
      for (int mi = 0; mi < Shape::kMT; ++mi) af[mi] = frag_s[((warp_m * Shape::kMT + mi) * 4 + slice) * 32 + lane];
      uint2 bf[Shape::kNT];
#pragma unroll
      for (int ni = 0; ni < Shape::kNT; ++ni) {
        // Activation row (warp_n * 32 + ni * 8 + q), elements 16 slice + 4t..4t+3.
        const int r = warp_n * 32 + ni * 8 + q;
        bf[ni] = *reinterpret_cast<const uint2*>(act + ActOffset(r, 2 * slice + (t >> 1)) + (t & 1) * 8);
      }
#pragma unroll
      for (int mi = 0; mi < Shape::kMT; ++mi)
#pragma unroll
        for (int ni = 0; ni < Shape::kNT; ++ni) {
          MmaF16F32(acc[mi][ni], af[mi].x, af[mi].y, af[mi].z, af[mi].w, bf[ni].x, bf[ni].y);
        }
    }
  }

  // acc[mi][ni] = (output m, activation row n): c0 (m, n), c1 (m, n + 1), c2 (m + 8, n), c3 (m + 8, n + 1).
  float* dst = a.dst + (a.direct ? size_t{0} : static_cast<size_t>(blockIdx.z) * a.rows * a.out);
  auto store = [&](float v, int n, int m) {
    if (n >= a.rows || m >= a.out) return;
    if (a.direct) {
      v *= a.row_divisors ? a.scale / a.row_divisors[m] : (a.row_scales ? a.row_scales[m] : a.scale);
    }
    dst[static_cast<size_t>(n) * a.out + m] = v;
  };
#pragma unroll
  for (int mi = 0; mi < Shape::kMT; ++mi) {
    const int m = (tile0 + warp_m * Shape::kMT + mi) * 16 + q;
#pragma unroll
    for (int ni = 0; ni < Shape::kNT; ++ni) {
      const int n = n0 + warp_n * 32 + ni * 8 + 2 * t;
      store(acc[mi][ni][0], n, m);
      store(acc[mi][ni][1], n + 1, m);
      store(acc[mi][ni][2], n, m + 8);
      store(acc[mi][ni][3], n + 1, m + 8);
    }
  }
}

template <typename Format, int BN>
cudaError_t LaunchGemm(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  constexpr size_t smem = GemmSharedBytes<Format, BN>();
  static_assert(smem <= 99 * 1024, "fits the 99 KB a block may use on sm_120/121");
  auto* kernel = GemmLinearKernel<Format, BN>;
  // The shared-memory opt-in, once per device (devices 0..63 remembered; others set it every call).
  static std::atomic<uint64_t> allowed{0};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (allowed.load(std::memory_order_acquire) & bit) == 0) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
    allowed.fetch_or(bit, std::memory_order_acq_rel);
  }
  const dim3 grid(static_cast<unsigned>(p.m_blocks), static_cast<unsigned>(p.n_blocks),
                  static_cast<unsigned>(p.num_splits));
  return LaunchStepKernel(kernel, grid, dim3(kThreads), smem, stream, a);
}

template <typename Format>
cudaError_t LaunchGemmThenEpilogue(GemmArgs a, int rows, float* y, float* workspace, const DecodeEpilogue& e,
                                   cudaStream_t stream) {
  const GemmPlan p = PlanGemm(rows, a.out, a.in);
  a.stages_per_split = p.stages_per_split;
  a.direct = GemmWritesDirectly(p, e);
  a.dst = a.direct ? y : workspace;
  cudaError_t err = cudaSuccess;
  switch (p.block_rows) {
    case 32: err = LaunchGemm<Format, 32>(a, p, stream); break;
    case 64: err = LaunchGemm<Format, 64>(a, p, stream); break;
    default: err = LaunchGemm<Format, 128>(a, p, stream); break;
  }
  if (err != cudaSuccess || a.direct) return err;
  const SplitSum sum{workspace, p.num_splits, rows, a.out, a.scale, a.row_scales, a.row_divisors};
  return LaunchLinearEpilogue(sum, y, e, stream);
}

}  // namespace

GemmPlan PlanGemm(int rows, int out, int in) {
  GemmPlan p;
  p.block_rows = rows <= 32 ? 32 : (rows <= 64 ? 64 : 128);
  p.m_blocks = ((out + 15) / 16 + kTiles - 1) / kTiles;
  p.n_blocks = (rows + p.block_rows - 1) / p.block_rows;
  p.stages = in / kGemmStageK;
  // Fewer blocks than two a SM (batched decode: one activation block) split K, each split keeping at
  // least 4 stages (256 elements). The split count minimises a bandwidth model: weight bytes (~0.75
  // a weight) plus the fp32 partials written and read (8 bytes a row and output a split), over the
  // fraction of the last wave of blocks that is filled.
  const int64_t blocks = static_cast<int64_t>(p.m_blocks) * p.n_blocks;
  const int64_t slots = 2 * static_cast<int64_t>(MultiprocessorCount());
  int splits = 1;
  p.few_blocks = blocks < slots;
  if (p.few_blocks) {
    const double weight_bytes = 0.75 * out * static_cast<double>(in), partial_bytes = 8.0 * rows * static_cast<double>(out);
    double best = 0;
    for (int s = 1; s <= std::max(1, p.stages / 4); ++s) {
      const int64_t n = blocks * s, waves = (n + slots - 1) / slots;
      const double cost = (weight_bytes + partial_bytes * s) * static_cast<double>(waves * slots) / static_cast<double>(n);
      if (s == 1 || cost < best) {
        best = cost;
        splits = s;
      }
    }
  }
  p.stages_per_split = (p.stages + splits - 1) / splits;
  p.num_splits = (p.stages + p.stages_per_split - 1) / p.stages_per_split;
  return p;
}

cudaError_t LaunchNvfp4Gemm(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                            const DecodeEpilogue& epilogue, cudaStream_t stream) {
  GemmArgs a{};
  a.codes = w.packed;
  a.scales = w.scales;
  a.x = x;
  a.rows = rows;
  a.out = w.out;
  a.in = w.in;
  a.tiles = (w.out + 15) / 16;
  a.scale = Nvfp4SumScale(w);
  a.row_divisors = w.row_global_scales;
  return LaunchGemmThenEpilogue<Nvfp4Format>(a, rows, y, workspace, epilogue, stream);
}

cudaError_t LaunchFp8Gemm(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                          const DecodeEpilogue& epilogue, cudaStream_t stream) {
  GemmArgs a{};
  a.codes = w.weight;
  a.x = x;
  a.rows = rows;
  a.out = w.out;
  a.in = w.in;
  a.tiles = (w.out + 15) / 16;
  a.scale = 1.0f;
  a.row_scales = w.scales;
  return LaunchGemmThenEpilogue<Fp8Format>(a, rows, y, workspace, epilogue, stream);
}

}  // namespace sparkserve::kernels::cuda
