// Internal to kernels/cuda: the GEMM-linear launchers (gemm_linear.cu) and the block / K-split plan
// they share with the host code (gemm_linear.cc). No absl/fmt here: nvcc compiles this.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/decode_linear_kernels.h"  // kNvfp4Step, kFp8Step

namespace sparkserve::kernels::cuda {

inline constexpr int kGemmTilesPerBlock = 8;  // 16-row weight tiles a block owns: 128 output rows
inline constexpr int kGemmStageK = 64;        // K elements per pipeline stage (both formats)

// How one call is cut: a block computes kGemmTilesPerBlock * 16 outputs x block_rows activation
// rows over stages_per_split stages of K; blocks of one output tile in different K splits write
// separate fp32 partials. Depends only on (rows, out, in) and the device's SM count.
struct GemmPlan {
  int block_rows;  // 32, 64 or 128
  int m_blocks, n_blocks, num_splits, stages_per_split, stages;
  bool few_blocks;  // under two blocks a SM before splitting: K may be split
};
GemmPlan PlanGemm(int rows, int out, int in);

// Whether a call of `rows` rows writes y directly (one split, kStore) or goes through the workspace.
inline bool GemmWritesDirectly(const GemmPlan& p, const DecodeEpilogue& e) {
  return p.num_splits == 1 && e.kind == DecodeEpilogue::Kind::kStore;
}

cudaError_t LaunchNvfp4Gemm(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                            const DecodeEpilogue& epilogue, cudaStream_t stream);
cudaError_t LaunchFp8Gemm(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* workspace,
                          const DecodeEpilogue& epilogue, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
