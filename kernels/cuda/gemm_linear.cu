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
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/gemm_formats.cuh"
#include "kernels/cuda/gemm_linear_kernels.h"
#include "kernels/cuda/linear_epilogue_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps; the dequantisation gives each thread one (tile, lane)
constexpr int kTiles = 8;  // weight tiles a block: 128 outputs
constexpr int kFragBytes = kTiles * 4 * 32 * 16;  // A fragments of one stage: [tile][k16 slice][lane] 16 B

using Nvfp4 = Nvfp4Format<kTiles, kThreads>;
using Fp8 = Fp8Format<kTiles, kThreads>;

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
  const GemmKRange k_range = BlockKRange(a);
  const int k_begin = k_range.begin, num = k_range.num;
  const GemmActivationCopy<BN, kThreads> act_copy(a, n0, tid);
  auto stage_weights = [&](int i) {
    Format::Stage(a, tile0, k_begin + i, raw_s + (i % S) * Format::kStageBytes, tid);
  };
  auto stage_activations = [&](int i) {
    act_copy.Stage(act_s + (i % S) * Shape::kActBytes, k_begin + i, ActOffset);
  };
  GemmPrologue<S>(num, stage_weights, stage_activations);

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
      stage_weights(ahead);
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
  const int split = static_cast<int>(blockIdx.z);
#pragma unroll
  for (int mi = 0; mi < Shape::kMT; ++mi) {
    const int m = (tile0 + warp_m * Shape::kMT + mi) * 16 + q;
#pragma unroll
    for (int ni = 0; ni < Shape::kNT; ++ni) {
      const int n = n0 + warp_n * 32 + ni * 8 + 2 * t;
      GemmStore(a, split, acc[mi][ni][0], n, m);
      GemmStore(a, split, acc[mi][ni][1], n + 1, m);
      GemmStore(a, split, acc[mi][ni][2], n, m + 8);
      GemmStore(a, split, acc[mi][ni][3], n + 1, m + 8);
    }
  }
}

template <typename Format, int BN>
cudaError_t LaunchGemm(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  constexpr size_t smem = GemmSharedBytes<Format, BN>();
  static_assert(smem <= 99 * 1024, "fits the 99 KB a block may use on sm_120/121");
  const cudaError_t err = AllowDynamicSharedMemory<GemmLinearKernel<Format, BN>>(static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(p.m_blocks), static_cast<unsigned>(p.n_blocks),
                  static_cast<unsigned>(p.num_splits));
  return LaunchStepKernel(GemmLinearKernel<Format, BN>, grid, dim3(kThreads), smem, stream, a);
}

template <typename Format>
cudaError_t LaunchMma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  switch (p.block_rows) {
    case 32: return LaunchGemm<Format, 32>(a, p, stream);
    case 64: return LaunchGemm<Format, 64>(a, p, stream);
    default: return LaunchGemm<Format, 128>(a, p, stream);
  }
}

template <typename MmaFormat>
cudaError_t LaunchGemmThenEpilogue(GemmArgs a, int rows, float* y, float* workspace, const DecodeEpilogue& e,
                                   GemmKernel kernel, cudaStream_t stream) {
  const GemmPlan p = PlanGemm(rows, a.out, a.in, kernel);
  a.stages_per_split = p.stages_per_split;
  a.direct = GemmWritesDirectly(p, e, a.out);
  a.dst = a.direct ? y : workspace;
  constexpr bool kNvfp4 = std::is_same_v<MmaFormat, Nvfp4>;
  cudaError_t err = cudaSuccess;
  if (p.kernel == GemmKernel::kWgmma) {
    if (GemmFusesSwiGlu(p, e, a.out)) {  // the kernel writes silu(gate) * up itself: no partials
      a.swiglu_out = e.x_out;
      a.up_tile_offset = a.out / 2 / 16 - p.tiles_per_block / 2;
    }
    err = kNvfp4 ? LaunchNvfp4GemmWgmma(a, p, stream) : LaunchFp8GemmWgmma(a, p, stream);
    if (a.swiglu_out != nullptr) return err;
  } else {
    err = LaunchMma<MmaFormat>(a, p, stream);
  }
  if (err != cudaSuccess || a.direct) return err;
  const SplitSum sum{workspace, p.num_splits, rows, a.out, a.scale, a.row_scales, a.row_divisors};
  return LaunchLinearEpilogue(sum, y, e, stream);
}

}  // namespace

bool DeviceRunsWgmma() {
#if defined(SPARKSERVE_CUDA_HAS_SM90A)
  static const bool runs = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;
  }();
  return runs;
#else
  return false;
#endif
}

GemmKernel ResolveGemmKernel(GemmKernel kernel) {
  if (kernel != GemmKernel::kAuto) return kernel;
  return DeviceRunsWgmma() ? GemmKernel::kWgmma : GemmKernel::kMma;
}

GemmPlan PlanGemm(int rows, int out, int in, GemmKernel kernel) {
  GemmPlan p;
  p.kernel = ResolveGemmKernel(kernel);
  int blocks_per_sm = 2;
  if (p.kernel == GemmKernel::kWgmma) {
    // 128 outputs x 64 rows (batched decode), two blocks a SM; else 256 outputs x 128 rows, one.
    p.block_rows = rows <= 64 ? 64 : 128;
    p.tiles_per_block = rows <= 64 ? 8 : 16;
    blocks_per_sm = rows <= 64 ? 2 : 1;
  } else {
    p.block_rows = rows <= 32 ? 32 : (rows <= 64 ? 64 : 128);
    p.tiles_per_block = kTiles;
  }
  p.m_blocks = ((out + 15) / 16 + p.tiles_per_block - 1) / p.tiles_per_block;
  p.n_blocks = (rows + p.block_rows - 1) / p.block_rows;
  p.stages = in / kGemmStageK;
  // Fewer blocks than a full wave (batched decode: one activation block) split K, each split keeping at
  // least 4 stages (256 elements). The split count minimises a bandwidth model: weight bytes (~0.75
  // a weight) plus the fp32 partials written and read (8 bytes a row and output a split), over the
  // fraction of the last wave of blocks that is filled.
  const int64_t blocks = static_cast<int64_t>(p.m_blocks) * p.n_blocks;
  const int64_t slots = blocks_per_sm * static_cast<int64_t>(MultiprocessorCount());
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
                            const DecodeEpilogue& epilogue, GemmKernel kernel, cudaStream_t stream) {
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
  return LaunchGemmThenEpilogue<Nvfp4>(a, rows, y, workspace, epilogue, kernel, stream);
}

cudaError_t LaunchFp8Gemm(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                          const DecodeEpilogue& epilogue, GemmKernel kernel, cudaStream_t stream) {
  GemmArgs a{};
  a.codes = w.weight;
  a.x = x;
  a.rows = rows;
  a.out = w.out;
  a.in = w.in;
  a.tiles = (w.out + 15) / 16;
  a.scale = 1.0f;
  a.row_scales = w.scales;
  return LaunchGemmThenEpilogue<Fp8>(a, rows, y, workspace, epilogue, kernel, stream);
}

}  // namespace sparkserve::kernels::cuda
