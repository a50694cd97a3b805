// Internal to kernels/cuda: the GEMM-linear launchers (gemm_linear.cu) and the block / K-split plan
// they share with the host code (gemm_linear.cc). No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/decode_linear_kernels.h"  // kNvfp4Step, kFp8Step

namespace sparkserve::kernels::cuda {

inline constexpr int kGemmStageK = 64;  // K elements per pipeline stage (both formats, both kernels)

// Which GEMM kernel a call runs. kMma: mma.m16n8k16 (every target); kWgmma: sm_90a's warpgroup mma
// (compute capability 9.0 with sm_90a compiled in). kAuto: kWgmma where it runs, else kMma.
enum class GemmKernel : int { kAuto, kMma, kWgmma };
bool DeviceRunsWgmma();
GemmKernel ResolveGemmKernel(GemmKernel kernel);  // kAuto -> the device's choice; others unchanged

// How one call is cut: a block computes tiles_per_block * 16 outputs x block_rows activation rows
// over stages_per_split stages of K; blocks of one output tile in different K splits write separate
// fp32 partials (num_splits planes). Depends only on (rows, out, in, kernel) and the device's SM count.
struct GemmPlan {
  GemmKernel kernel;    // kMma or kWgmma (resolved)
  int block_rows;       // kMma: 32, 64 or 128; kWgmma: 64 or 128
  int tiles_per_block;  // kMma: 8; kWgmma: 8 (64 rows) or 16
  int m_blocks, n_blocks, num_splits, stages_per_split, stages;
  bool few_blocks;      // under a full wave of blocks before splitting: K may be split
};
GemmPlan PlanGemm(int rows, int out, int in, GemmKernel kernel = GemmKernel::kAuto);

// Whether the wgmma kernel computes a fused gate|up linear's SwiGLU itself: 256-output blocks of 128
// gate + the same 128 up outputs (F = out / 2 a multiple of 128), one split.
inline bool GemmFusesSwiGlu(const GemmPlan& p, const DecodeEpilogue& e, int out) {
  return p.kernel == GemmKernel::kWgmma && p.tiles_per_block == 16 && p.num_splits == 1 &&
         e.kind == DecodeEpilogue::Kind::kSwiGlu && out % 256 == 0;
}

// Whether a call writes its output directly (one split, kStore, or a fused SwiGLU) or goes through
// the workspace.
inline bool GemmWritesDirectly(const GemmPlan& p, const DecodeEpilogue& e, int out) {
  return (p.num_splits == 1 && e.kind == DecodeEpilogue::Kind::kStore) || GemmFusesSwiGlu(p, e, out);
}

cudaError_t LaunchNvfp4Gemm(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                            const DecodeEpilogue& epilogue, GemmKernel kernel, cudaStream_t stream);
cudaError_t LaunchFp8Gemm(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                          const DecodeEpilogue& epilogue, GemmKernel kernel, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
