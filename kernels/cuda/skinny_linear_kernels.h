// Internal to kernels/cuda: the skinny-linear launchers (skinny_linear.cu) and the work plan they
// share with the host code (skinny_linear.cc) and the tests. No absl/fmt here: nvcc compiles this.
//
// Work split: stream-K (stream_k.h) over column blocks of kSkinnyBlockTiles 16-row tiles (256
// outputs) and the decode layout's K steps (128 elements NVFP4, 64 FP8).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/decode_linear_kernels.h"  // kNvfp4Step, kFp8Step
#include "kernels/cuda/skinny_linear.h"
#include "kernels/cuda/stream_k.h"

namespace sparkserve::kernels::cuda {

inline constexpr int kSkinnyWarps = 8;                     // a block: 256 threads
inline constexpr int kSkinnyWarpTiles = 2;                 // 16-row weight tiles a warp owns
inline constexpr int kSkinnyBlockTiles = kSkinnyWarps * kSkinnyWarpTiles;  // 16 tiles = 256 outputs

// Blocks a SM the kernel for n_tiles 8-row activation tiles is built for (its __launch_bounds__):
// up to 4 n-tiles (32 accumulators a thread) two, so 16 warps a SM hide the weight stream's
// latency; past that one (64 accumulators, and the mma rather than the stream sets the pace).
constexpr int SkinnyMinBlocksPerSm(int n_tiles) { return n_tiles <= 4 ? 2 : 1; }

struct SkinnyPlan {
  int n_tiles;          // 8-row activation tiles: ceil(rows / 8), 1..8
  int tiles;            // 16-row weight tiles: ceil(out / 16)
  int col_blocks;       // ceil(tiles / kSkinnyBlockTiles)
  int steps;            // K steps a column block (in / 128 NVFP4, in / 64 FP8)
  int64_t units;        // col_blocks * steps
  int grid;             // blocks (<= units): SMs * blocks_per_sm
  int blocks_per_sm;    // 2 up to 32 rows (<= 128 registers a thread), else 1
  int planes;           // partial planes SplitSum adds (most pieces of one column block)
  int stages;           // shared-memory ring stages (2..kSkinnyMaxStages)
  size_t stage_bytes;   // one ring stage: the block's weights of one step + the activations of it
  size_t smem;          // stages * stage_bytes
};
// For 1..kMaxSkinnyRows rows of an [out, in] weight (in a multiple of the format's step) on the
// current device.
SkinnyPlan PlanSkinny(bool nvfp4, int rows, int out, int in);

cudaError_t LaunchNvfp4Skinny(const Nvfp4LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                              const DecodeEpilogue& epilogue, cudaStream_t stream);
cudaError_t LaunchFp8Skinny(const Fp8LinearDevice& w, const __half* x, int rows, float* y, float* partial,
                            const DecodeEpilogue& epilogue, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
