// GEMM linear on sm_90a's warpgroup mma (wgmma), reading the decode kernels' tile-major weights
// (decode_linear.h). A block is two warpgroups; each owns kHalves x 64 outputs (4 or 8 weight tiles)
// x BN activation rows. Per 64-element K stage:
//   1. cp.async stages the raw weight codes (+ NVFP4 group scales) and the fp16 activations in shared
//      memory, S - 2 stages ahead; the activations land in wgmma's 128-byte-swizzled K-major layout;
//   2. every thread dequantises its own A fragments (tile = its warp's, rows q, q + 8) for the 4 k16
//      slices into registers, in natural K order (gemm_formats.cuh DequantiseNatural);
//   3. each warpgroup issues 4 x kHalves wgmma m64nBNk16 (A from registers, B = the activations by
//      descriptor) and, while they run, dequantises the next stage into its other register set.
// One __syncthreads a stage: it publishes the next stage's copies and proves every warpgroup has
// waited for the wgmma that read the buffer refilled next. Scales as gemm_linear.cu's kernel.
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/gemm_formats.cuh"
#include "kernels/cuda/gemm_linear_kernels.h"
#include "kernels/cuda/step_launch.h"

#include <cstdint>

namespace sparkserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // two warpgroups

// The two shapes: 256 outputs x 128 rows (prefill; one block a SM) and 128 outputs x 64 rows
// (batched decode; two blocks a SM). 5 stages: S - 2 = 3 loading while one is multiplied.
// Tried for the 64-row shape, on 18432x2560 NVFP4 at 64 rows (37.8 us here), both slower: one
// stream-K wave of 256-output blocks, 8 stages, one block a SM (51 us: the per-stage chain of
// barrier, dequantise and wgmma wait sets the pace, and two blocks a SM overlap two chains); 8
// stages at two blocks a SM (39.0 us), with the SwiGLU also fused at 64 rows (no step gain).
template <int BN, int kHalves>
struct WgmmaShape {
  static_assert(BN == 64 || BN == 128, "wgmma n of the wrappers in ptx.cuh");
  static constexpr int kTiles = 2 * 4 * kHalves;  // weight tiles a block: 8 or 16 (128 or 256 outputs)
  static constexpr int kActBytes = BN * 128;      // [BN rows][64 f16], swizzled; a multiple of 1024
  static constexpr int kStages = 5;
};

template <typename Format, int BN, int kHalves>
constexpr size_t WgmmaSharedBytes() {
  using Shape = WgmmaShape<BN, kHalves>;
  // + 1 KB to align the activation buffers to the 1024 bytes the 128-byte swizzle repeats over.
  return 1024 + static_cast<size_t>(Shape::kStages) * (Shape::kActBytes + Format::kStageBytes);
}

// Fused SwiGLU store: warpgroup 1 (the up outputs) hands its sums to warpgroup 0 (the gate outputs of
// the same rows and columns: thread k of each holds the same positions) through shared memory, laid
// [accumulator][thread] so both sides are conflict-free; warpgroup 0 writes silu(gate) * up as f16.
// `tile` is the thread's first gate tile; `scratch` the (drained) pipeline buffers.
template <typename Shape, int kHalves, int kAcc>
__device__ __forceinline__ void StoreSwiGlu(const GemmArgs& a, const float (&acc)[kHalves][kAcc], int tile, int n0,
                                            uint8_t* scratch) {
  static_assert(kHalves * kAcc * 128 * 4 <= Shape::kStages * Shape::kActBytes, "the up sums fit the buffers");
  const int tid = static_cast<int>(threadIdx.x), k = tid % 128, lane = tid % 32, q = lane / 4, t = lane % 4;
  float* up = reinterpret_cast<float*>(scratch);  // [kHalves * kAcc][128]
  CpAsyncWait<0>();  // nothing still lands in the buffers (the trailing groups are empty)
  __syncthreads();   // every warpgroup is past its last wgmma: the buffers are free
  if (tid >= 128) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
#pragma unroll
      for (int j = 0; j < kAcc; ++j) up[(h * kAcc + j) * 128 + k] = acc[h][j];
  }
  __syncthreads();
  if (tid >= 128) return;
  const int f = a.out / 2;
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int m = (tile + 4 * h) * 16 + q;  // gate outputs m, m + 8; their up outputs f + m, f + m + 8
    const float gate_scale[2] = {a.OutputScale(m), a.OutputScale(m + 8)};
    const float up_scale[2] = {a.OutputScale(f + m), a.OutputScale(f + m + 8)};
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      const int c = j % 4, hi = c >= 2 ? 1 : 0, n = n0 + 8 * (j / 4) + 2 * t + (c & 1);
      if (n >= a.rows) continue;
      const float g = acc[h][j] * gate_scale[hi], u = up[(h * kAcc + j) * 128 + k] * up_scale[hi];
      a.swiglu_out[static_cast<size_t>(n) * f + m + 8 * hi] = ToHalfSaturated(Silu(g) * u);
    }
  }
}

// grid (m_blocks, n_blocks, num_splits): block (x, y, z) takes column block x (kTiles weight tiles;
// 128 gate + 128 up tiles' outputs when fusing SwiGLU), activation rows y * BN.., the K stages of
// split z. block: 256 threads; dynamic shared memory WgmmaSharedBytes.
template <typename Format, int BN, int kHalves>
__global__ void __launch_bounds__(kThreads, kHalves == 1 ? 2 : 1) GemmWgmmaKernel(const GemmArgs a) {
#if defined(SPARKSERVE_HAS_WGMMA)
  using Shape = WgmmaShape<BN, kHalves>;
  constexpr int S = Shape::kStages;
  constexpr int kAcc = BN / 2;  // f32 accumulators a thread for one m64 wgmma
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint8_t* act_s = smem_raw + ((1024 - (SharedAddress(smem_raw) & 1023)) & 1023);  // [S][BN][128 bytes]
  uint8_t* raw_s = act_s + S * Shape::kActBytes;                                    // [S][Format::kStageBytes]

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int group = warp / 4, warp_in_group = warp % 4, q = lane / 4, t = lane % 4;
  const bool swiglu = kHalves == 2 && a.swiglu_out != nullptr;  // a block: 128 gate + the same 128 up outputs
  const int tile0 = static_cast<int>(blockIdx.x) * (swiglu ? Shape::kTiles / 2 : Shape::kTiles);
  const int n0 = static_cast<int>(blockIdx.y) * BN;
  const GemmKRange k_range = BlockKRange(a);
  const int k_begin = k_range.begin, num = k_range.num;
  const GemmActivationCopy<BN, kThreads> act_copy(a, n0, tid);
  auto stage_weights = [&](int i) {
    Format::Stage(a, tile0, k_begin + i, raw_s + (i % S) * Format::kStageBytes, tid);
  };
  auto stage_activations = [&](int i) {
    act_copy.Stage(act_s + (i % S) * Shape::kActBytes, k_begin + i, WgmmaSwizzle128Offset);
  };
  GemmPrologue<S>(num, stage_weights, stage_activations);

  float acc[kHalves][kAcc];
#pragma unroll
  for (int h = 0; h < kHalves; ++h)
#pragma unroll
    for (int j = 0; j < kAcc; ++j) acc[h][j] = 0.f;

  // Half h of warpgroup g multiplies tiles g * 4 kHalves + 4h .. + 3; this warp's is + warp_in_group.
  const int my_tile = group * 4 * kHalves + warp_in_group;
  using Fragments = uint32_t[kHalves][4][4];  // [half][k16 slice][a0..a3]
  auto dequantise = [&](int i, Fragments& f) {
    const uint8_t* src = raw_s + (i % S) * Format::kStageBytes;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) Format::DequantiseNatural(src, my_tile + 4 * h, lane, f[h]);
  };
  auto multiply = [&](int i, const Fragments& f) {
    const uint32_t act = SharedAddress(act_s + (i % S) * Shape::kActBytes);
    WgmmaFence();
#pragma unroll
    for (int slice = 0; slice < 4; ++slice) {
      const uint64_t b = WgmmaSwizzle128Descriptor(act + slice * 32);
#pragma unroll
      for (int h = 0; h < kHalves; ++h) {
        if constexpr (BN == 128) {
          WgmmaF16M64N128(acc[h], f[h][slice], b);
        } else {
          WgmmaF16M64N64(acc[h], f[h][slice], b);
        }
      }
    }
    WgmmaCommit();
  };
  // Stage i: its wgmma run while stage i + 1 is published and dequantised and stage i + S - 1 is
  // requested into the buffer of stage i - 1 (free: every thread waited for its wgmma last stage).
  auto step = [&](int i, const Fragments& cur, Fragments& next) {
    multiply(i, cur);
    if (i + 1 < num) {
      CpAsyncWait<S - 3>();  // groups 0..i+1 landed (S - 1 + i committed): stage i + 1 is here
      FenceProxyAsyncShared();
      __syncthreads();
      if (i + S - 1 < num) {
        stage_weights(i + S - 1);
        stage_activations(i + S - 1);
      }
      CpAsyncCommit();  // (possibly empty) group i + S - 1, so the count above stays exact
      dequantise(i + 1, next);
    }
    WgmmaWait<0>();
  };

  Fragments f0, f1;
  CpAsyncWait<S - 2>();  // group 0: stage 0
  FenceProxyAsyncShared();
  __syncthreads();
  dequantise(0, f0);
  for (int i = 0; i < num; i += 2) {  // two stages an iteration: the fragment sets swap by name
    step(i, f0, f1);
    if (i + 1 < num) step(i + 1, f1, f0);
  }
  // acc[h][4j + c]: output row (tile * 16 + q (+ 8 for c >= 2)), activation row n0 + 8j + 2t (+ 1 for
  // odd c).
  if (swiglu) {
    StoreSwiGlu<Shape>(a, acc, tile0 + my_tile, n0, act_s);
    return;
  }
  const int split = static_cast<int>(blockIdx.z);
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    const int m = (tile0 + my_tile + 4 * h) * 16 + q;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int n = n0 + 8 * j + 2 * t;
      GemmStore(a, split, acc[h][4 * j + 0], n, m);
      GemmStore(a, split, acc[h][4 * j + 1], n + 1, m);
      GemmStore(a, split, acc[h][4 * j + 2], n, m + 8);
      GemmStore(a, split, acc[h][4 * j + 3], n + 1, m + 8);
    }
  }
#else
  __trap();  // launched only where DeviceRunsWgmma()
#endif
}

template <typename Format, int BN, int kHalves>
cudaError_t LaunchWgmma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  constexpr size_t smem = WgmmaSharedBytes<Format, BN, kHalves>();
  static_assert(smem <= 227 * 1024, "fits the 227 KB a block may use on sm_90");
  constexpr auto kernel = GemmWgmmaKernel<Format, BN, kHalves>;
  if (p.tiles_per_block != WgmmaShape<BN, kHalves>::kTiles || p.block_rows != BN) return cudaErrorInvalidValue;
  const cudaError_t err = AllowDynamicSharedMemory<kernel>(static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(p.m_blocks), static_cast<unsigned>(p.n_blocks),
                  static_cast<unsigned>(p.num_splits));
  return LaunchStepKernel(kernel, grid, dim3(kThreads), smem, stream, a);
}

template <template <int, int> class Format>
cudaError_t LaunchGemmWgmmaOf(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  if (p.block_rows == 64) return LaunchWgmma<Format<8, kThreads>, 64, 1>(a, p, stream);
  return LaunchWgmma<Format<16, kThreads>, 128, 2>(a, p, stream);
}

}  // namespace

cudaError_t LaunchNvfp4GemmWgmma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  return LaunchGemmWgmmaOf<Nvfp4Format>(a, p, stream);
}
cudaError_t LaunchFp8GemmWgmma(const GemmArgs& a, const GemmPlan& p, cudaStream_t stream) {
  return LaunchGemmWgmmaOf<Fp8Format>(a, p, stream);
}

}  // namespace sparkserve::kernels::cuda
