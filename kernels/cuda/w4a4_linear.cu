// The W4A4 GEMM (w4a4_linear.h): block-scaled FP4 mma.sync on sm_120a / sm_121a. UNTESTED ON
// HARDWARE (no Blackwell GPU has run it yet; gpu_blackwell_test is its check).
//
// A block computes a 128 (weight rows) x 128 (tokens) tile of the output over all of K, 8 warps in a
// 2 (weight rows) x 4 (tokens) grid, each warp 4 m16 tiles x 4 n8 tiles (16 accumulators of 4). The
// K loop runs over stages of 128 elements (2 mma steps), double-buffered in shared memory with
// cp.async: the weights' fragment-ordered blocks (RepackNvfp4ForW4A4) are copied as they are, the
// activations' row-major codes into rows padded to 80 bytes so a warp's B-fragment loads hit 32
// distinct banks. Operands (PTX ISA, "Matrix Fragments for mma.m16n8k64", e2m1; lane = 4g + t):
//   A (weights, 16 x 64): a0 row g K 8t..8t+7, a1 row g+8, a2 row g K 32+8t.., a3 row g+8 K 32+8t..
//   B (tokens, 64 x 8):   b0 token g K 8t..8t+7, b1 token g K 32+8t..
//   scale A: lane passes row g + 8 * (lane & 1)'s four E4M3 scales (byte i = K 16i..16i+15), B: token
//   g's; byte-id and thread-id selectors 0 (CUTLASS SM120_16x8x64_TN_VS SFA/SFB layouts).
//   C: c0 (row g, token 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
// Out-of-range weight tiles and tokens are zero-filled by cp.async (src-size 0) and never stored.
#include "kernels/cuda/ptx.cuh"
#include "kernels/cuda/step_launch.h"
#include "kernels/cuda/w4a4_linear_kernels.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

#include <cuda_runtime.h>

namespace sparkserve::kernels::cuda {
namespace {

// The block-scaled FP4 mma exists on sm_120a/sm_121a (and their family targets) only.
#if defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL) || \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) &&                                     \
     (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1200 || __CUDA_ARCH_FAMILY_SPECIFIC__ == 1210))
#define SPARKSERVE_W4A4_MMA 1
#endif

constexpr int kThreads = 256;
constexpr int kWarpsOut = 2;                                   // warps along the weight rows
constexpr int kWarpTilesOut = kW4a4TileOut / 16 / kWarpsOut;   // 4 m16 tiles a warp
constexpr int kWarpTilesRows = kW4a4TileRows / 8 / (8 / kWarpsOut);  // 4 n8 tiles a warp
constexpr int kBlockTiles = kW4a4TileOut / 16;                 // 8 weight tiles a block
constexpr int kStageSteps = kW4a4TileK / kW4a4KStep;           // 2 mma K steps a stage
constexpr int kTileStepBytes = 512;                            // one tile's codes of one K step
constexpr int kTileStepScaleBytes = 64;                        // one tile's scales of one K step
constexpr int kRowCodeBytes = kW4a4TileK / 2;                  // 64: a token's codes of a stage
constexpr int kRowStride = kRowCodeBytes + 16;                 // 80 (bank spread, keeps 16-byte alignment)
constexpr int kRowScaleBytes = kW4a4TileK / 16;                // 8: a token's scales of a stage
static_assert(kWarpTilesOut * kWarpsOut * 16 == kW4a4TileOut && kWarpTilesRows * 4 * 8 == kW4a4TileRows);

struct __align__(16) Stage {
  uint8_t a_codes[kBlockTiles * kStageSteps * kTileStepBytes];        // [tile][step][lane][16]
  uint8_t a_scales[kBlockTiles * kStageSteps * kTileStepScaleBytes];  // [tile][step][row][4]
  uint8_t b_codes[kW4a4TileRows * kRowStride];                        // [token][80]
  uint8_t b_scales[kW4a4TileRows * kRowScaleBytes];                   // [token][8]
};
static_assert(sizeof(Stage) * 2 <= 48 * 1024, "two stages must fit the static shared-memory limit");


// c += (A * scale_a) (B * scale_b), 16 x 8 x 64, E2M1 operands with E4M3 scales per 16 K.
__device__ __forceinline__ void MmaFp4BlockScaled(float c[4], const uint32_t a[4], const uint32_t b[2], uint32_t sfa,
                                                  uint32_t sfb) {
#ifdef SPARKSERVE_W4A4_MMA
  const uint16_t zero = 0;  // byte-id / thread-id selectors
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%11,%12}, %13, {%14,%15};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "h"(zero), "h"(zero), "r"(sfb),
        "h"(zero), "h"(zero));
#else
  // Not an sm_120/sm_121 target: the host wrapper never launches the hardware variant here.
  __trap();
#endif
}

// A software model of the instruction above from the PTX ISA's fragment layouts (warp shuffles,
// slow): lets GPUs without the instruction run the kernel's whole data flow in tests. Lane (g, t)
// gathers row g / g+8 of A from lanes 4g.., tokens 2t / 2t+1 of B from lanes 8t.. / 8t+4.., the
// scales of row g from lane 4g (row g+8: 4g+1) and of token n from lane 4n.
__device__ __forceinline__ void MmaFp4BlockScaledModel(float c[4], const uint32_t a[4], const uint32_t b[2],
                                                       uint32_t sfa, uint32_t sfb) {
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  const uint32_t sa_lo = __shfl_sync(0xffffffffu, sfa, 4 * g), sa_hi = __shfl_sync(0xffffffffu, sfa, 4 * g + 1);
  const uint32_t sb0 = __shfl_sync(0xffffffffu, sfb, 8 * t), sb1 = __shfl_sync(0xffffffffu, sfb, 8 * t + 4);
  float sum[4] = {0.f, 0.f, 0.f, 0.f};
  for (int q = 0; q < 4; ++q) {  // the source lanes' thread-in-group: K 8q..8q+7 and 32+8q..
    uint32_t ra[4], rb0[2], rb1[2];
    for (int r = 0; r < 4; ++r) ra[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + q);
    for (int r = 0; r < 2; ++r) {
      rb0[r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t) + q);
      rb1[r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t + 1) + q);
    }
    for (int half = 0; half < 2; ++half) {  // registers a0/a1 + b0 (K < 32), a2/a3 + b1 (K >= 32)
      const int block = 2 * half + q / 2;   // the 16-element K group
      auto scale = [block](uint32_t word) { return quant::E4M3ToF32(static_cast<uint8_t>(word >> (8 * block))); };
      const float s_lo = scale(sa_lo), s_hi = scale(sa_hi), s_b0 = scale(sb0), s_b1 = scale(sb1);
      for (int j = 0; j < 8; ++j) {
        auto value = [j](uint32_t word) { return quant::E2M1ToF32(static_cast<uint8_t>((word >> (4 * j)) & 0xfu)); };
        const float x_lo = value(ra[2 * half]) * s_lo, x_hi = value(ra[2 * half + 1]) * s_hi;
        const float y0 = value(rb0[half]) * s_b0, y1 = value(rb1[half]) * s_b1;
        sum[0] += x_lo * y0;
        sum[1] += x_lo * y1;
        sum[2] += x_hi * y0;
        sum[3] += x_hi * y1;
      }
    }
  }
  for (int i = 0; i < 4; ++i) c[i] += sum[i];
}

// The weight part of K stage `ks` (weight blocks depend on no earlier kernel).
__device__ __forceinline__ void LoadWeightStage(Stage& st, const uint8_t* __restrict__ codes,
                                                const uint8_t* __restrict__ scales, int tile0, int tiles, int steps,
                                                int ks) {
  constexpr int kChunks = kStageSteps * kTileStepBytes / 16;  // 64 16-byte chunks per tile
  for (int i = threadIdx.x; i < kBlockTiles * kChunks; i += kThreads) {
    const int tl = i / kChunks, c = i % kChunks, tile = tile0 + tl;
    const bool ok = tile < tiles;
    const size_t block = static_cast<size_t>(ok ? tile : 0) * steps + static_cast<size_t>(kStageSteps) * ks;
    CpAsync16(st.a_codes + tl * kChunks * 16 + c * 16, codes + block * kTileStepBytes + c * 16, ok);
  }
  constexpr int kScaleChunks = kStageSteps * kTileStepScaleBytes / 16;  // 8 per tile
  for (int i = threadIdx.x; i < kBlockTiles * kScaleChunks; i += kThreads) {
    const int tl = i / kScaleChunks, c = i % kScaleChunks, tile = tile0 + tl;
    const bool ok = tile < tiles;
    const size_t block = static_cast<size_t>(ok ? tile : 0) * steps + static_cast<size_t>(kStageSteps) * ks;
    CpAsync16(st.a_scales + tl * kScaleChunks * 16 + c * 16, scales + block * kTileStepScaleBytes + c * 16, ok);
  }
}

// The activation part of K stage `ks`: tokens row0.. (zeros past `rows`).
__device__ __forceinline__ void LoadActivationStage(Stage& st, const uint8_t* __restrict__ codes,
                                                    const uint8_t* __restrict__ scales, int row0, int rows, int in,
                                                    int ks) {
  constexpr int kChunks = kRowCodeBytes / 16;  // 4 per token
  for (int i = threadIdx.x; i < kW4a4TileRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks, row = row0 + r;
    const bool ok = row < rows;
    const uint8_t* src = codes + static_cast<size_t>(ok ? row : 0) * (in / 2) + ks * kRowCodeBytes + c * 16;
    CpAsync16(st.b_codes + r * kRowStride + c * 16, src, ok);
  }
  for (int r = threadIdx.x; r < kW4a4TileRows; r += kThreads) {
    const int row = row0 + r;
    const bool ok = row < rows;
    const uint8_t* src = scales + static_cast<size_t>(ok ? row : 0) * (in / 16) + ks * kRowScaleBytes;
    CpAsync8(st.b_scales + r * kRowScaleBytes, src, ok);
  }
}

// grid: (ceil(tiles / 8), ceil(rows / 128)), 256 threads. kModel: the software mma model.
template <bool kModel>
__global__ void __launch_bounds__(kThreads)
    W4A4GemmKernel(const uint8_t* __restrict__ w_codes, const uint8_t* __restrict__ w_scales,
                   const uint8_t* __restrict__ x_codes, const uint8_t* __restrict__ x_scales, int rows, int out,
                   int in, float* __restrict__ partial) {
  __shared__ Stage stages[2];
  const int tiles = (out + 15) / 16, steps = in / kW4a4KStep, num_stages = in / kW4a4TileK;
  const int tile0 = blockIdx.x * kBlockTiles, row0 = blockIdx.y * kW4a4TileRows;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const int warp_out = warp % kWarpsOut, warp_rows = warp / kWarpsOut;

  LoadWeightStage(stages[0], w_codes, w_scales, tile0, tiles, steps, 0);  // before the wait: weights only
  WaitForPriorGrids();
  AllowNextGrid();
  LoadActivationStage(stages[0], x_codes, x_scales, row0, rows, in, 0);
  CpAsyncCommit();

  float acc[kWarpTilesOut][kWarpTilesRows][4] = {};
  for (int ks = 0; ks < num_stages; ++ks) {
    if (ks + 1 < num_stages) {  // the next stage loads into the buffer freed at the end of ks - 1
      LoadWeightStage(stages[(ks + 1) & 1], w_codes, w_scales, tile0, tiles, steps, ks + 1);
      LoadActivationStage(stages[(ks + 1) & 1], x_codes, x_scales, row0, rows, in, ks + 1);
      CpAsyncCommit();
      CpAsyncWait<1>();  // stage ks has landed (this thread's copies)
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // ... and every thread's
    const Stage& st = stages[ks & 1];
#pragma unroll
    for (int s = 0; s < kStageSteps; ++s) {
      uint32_t a[kWarpTilesOut][4], sa[kWarpTilesOut];
#pragma unroll
      for (int i = 0; i < kWarpTilesOut; ++i) {
        const int tl = warp_out * kWarpTilesOut + i;
        const uint4 v = *reinterpret_cast<const uint4*>(st.a_codes + (tl * kStageSteps + s) * kTileStepBytes + 16 * lane);
        a[i][0] = v.x;
        a[i][1] = v.y;
        a[i][2] = v.z;
        a[i][3] = v.w;
        sa[i] = *reinterpret_cast<const uint32_t*>(st.a_scales + (tl * kStageSteps + s) * kTileStepScaleBytes +
                                                   4 * (g + 8 * (lane & 1)));
      }
      uint32_t b[kWarpTilesRows][2], sb[kWarpTilesRows];
#pragma unroll
      for (int j = 0; j < kWarpTilesRows; ++j) {
        const int r = (warp_rows * kWarpTilesRows + j) * 8 + g;
        const uint8_t* p = st.b_codes + r * kRowStride + s * (kW4a4KStep / 2) + 4 * t;
        b[j][0] = *reinterpret_cast<const uint32_t*>(p);
        b[j][1] = *reinterpret_cast<const uint32_t*>(p + 16);  // K + 32
        sb[j] = *reinterpret_cast<const uint32_t*>(st.b_scales + r * kRowScaleBytes + 4 * s);
      }
#pragma unroll
      for (int i = 0; i < kWarpTilesOut; ++i) {
#pragma unroll
        for (int j = 0; j < kWarpTilesRows; ++j) {
          if constexpr (kModel) {
            MmaFp4BlockScaledModel(acc[i][j], a[i], b[j], sa[i], sb[j]);
          } else {
            MmaFp4BlockScaled(acc[i][j], a[i], b[j], sa[i], sb[j]);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with stages[ks & 1] before iteration ks + 1 refills it
  }

#pragma unroll
  for (int i = 0; i < kWarpTilesOut; ++i) {
    const int o = (tile0 + warp_out * kWarpTilesOut + i) * 16 + g;
#pragma unroll
    for (int j = 0; j < kWarpTilesRows; ++j) {
      const int r = row0 + (warp_rows * kWarpTilesRows + j) * 8 + 2 * t;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int oc = o + 8 * (c / 2), rc = r + (c % 2);
        if (oc < out && rc < rows) partial[static_cast<size_t>(rc) * out + oc] = acc[i][j][c];
      }
    }
  }
}

}  // namespace

cudaError_t LaunchW4A4Gemm(const Nvfp4W4A4LinearDevice& w, const Nvfp4Activations& a, int rows, float* partial,
                           W4A4Mma mma, cudaStream_t stream) {
  const int tiles = (w.out + 15) / 16;
  const dim3 grid((tiles + kBlockTiles - 1) / kBlockTiles, (rows + kW4a4TileRows - 1) / kW4a4TileRows);
  auto* kernel = mma == W4A4Mma::kSoftwareModel ? W4A4GemmKernel<true> : W4A4GemmKernel<false>;
  return LaunchStepKernel(kernel, grid, dim3(kThreads), 0, stream, w.codes, w.scales, a.codes, a.scales, rows, w.out,
                          w.in, partial);
}

}  // namespace sparkserve::kernels::cuda
