// The Blackwell W4A4 NVFP4 linear for prefill: activations quantised to NVFP4 on the GPU with the
// module's calibrated input_global_scale (nvfp4_activation_quant.h), multiplied with NVFP4 weights by
// the block-scaled FP4 tensor-core instruction
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3
// (both operands E2M1, one E4M3 scale per 16 K elements applied by the hardware, fp32 accumulate).
// That instruction exists on sm_120a / sm_121a only (ptxas 13.0 rejects it for sm_100a, whose FP4
// path is tcgen05): the kernel is compiled for those targets and the host wrapper refuses any other
// device with FailedPrecondition.
//
// UNTESTED ON HARDWARE: written and compiled without a Blackwell GPU. The repack is checked on the
// CPU against the PTX ISA's documented fragment layout (tests/unit/kernels_cuda), the activation
// quantisation bit for bit against the CPU emulation on the H200 (gpu_ops_test), and the whole
// linear against a CPU emulation in gpu_blackwell_test, which only runs on sm_120/sm_121.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/decode_linear.h"  // DecodeEpilogue

namespace sparkserve::kernels::cuda {

inline constexpr int kW4a4KStep = 64;  // K elements of one mma (4 groups of 16)
inline constexpr int kW4a4MinIn = 128;  // `in` must be a multiple of this (the kernel's K stage)
// Rows (tokens) one GEMM launch takes; more rows loop, so the workspace stays bounded.
inline constexpr int kW4a4ChunkRows = 512;

// An NVFP4 Linear repacked for the W4A4 kernel, per 16-row tile and 64-element K step:
//   codes  [tiles, in/64, 32 lanes, 16 bytes]: lane l = 4g + t holds the mma's A registers
//          a0 = row g, K 8t..8t+7; a1 = row g+8, same K; a2 = row g, K 32+8t..; a3 = row g+8, K 32+8t..
//          (8 E2M1 codes a register, element k0+j at bits 4j..4j+3, each register 4 bytes little endian)
//   scales [tiles, in/64, 16 rows, 4 bytes]: row r's four E4M3 group scales of the step (byte i =
//          K 16i..16i+15), the word lane l passes as scale-a-data for row g + 8 * (l & 1).
// Rows past `out` (the last tile's padding) are zero. Bytes: ceil(out/16)*16 * in * 9/16, the same
// as the decode layout: enabling W4A4 duplicates a linear's NVFP4 weight bytes.
struct Nvfp4W4A4LinearDevice {
  const uint8_t* codes;
  const uint8_t* scales;
  float weight_global_scale;  // divisor: W = e2m1 * scale / weight_global_scale
  float input_global_scale;   // divisor of the activations (calibrated, static)
  int out, in;                // in % 128 == 0
  // Optional [out] per-row weight divisors replacing weight_global_scale (fused linears).
  const float* row_global_scales = nullptr;
};

struct Nvfp4W4A4Layout {
  std::vector<uint8_t> codes, scales;
};
// Host repack (once, at load) of compressed-tensors' row-major weight_packed [out, in/2] and
// weight_scale [out, in/16]. Requires in % 64 == 0 and the spans' sizes to match.
Nvfp4W4A4Layout RepackNvfp4ForW4A4(std::span<const uint8_t> packed, std::span<const uint8_t> scales, int out, int in);

// Whether the device runs the kernel (compute capability 12.x: sm_120 / sm_121), looked up once.
bool W4A4LinearSupportedOnCurrentDevice();

// Scratch for up to `rows` rows (chunks of kW4a4ChunkRows): the quantised activations and the fp32
// partials the epilogue reads.
size_t W4A4LinearWorkspaceBytes(int out, int in, int rows);

// Which mma the GEMM runs: the hardware instruction (sm_120/sm_121 only), or a software model of
// its documented semantics (PTX ISA fragment and scale layouts, warp shuffles, ~50x slower) that any
// sm_90+ GPU runs: the H200 tests check the kernel's whole data flow with it, leaving only the
// instruction itself to the Blackwell test.
enum class W4A4Mma { kHardware, kSoftwareModel };

// y[r, o] = sum_i xq[r, i] * W[o, i] for r < rows (>= 1), where xq is x [rows, in] f16 quantised
// to NVFP4 with input_global_scale (QuantizeActivationsNvfp4); the epilogue (decode_linear.h) runs
// on the result as for the decode linears. kHardware: FailedPrecondition on devices other than
// sm_120/sm_121.
absl::Status Nvfp4W4A4Linear(const Nvfp4W4A4LinearDevice& w, const __half* x, int rows, float* y, void* workspace,
                             cudaStream_t stream, const DecodeEpilogue& epilogue = {},
                             W4A4Mma mma = W4A4Mma::kHardware);

}  // namespace sparkserve::kernels::cuda
