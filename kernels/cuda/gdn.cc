// Gated DeltaNet on CUDA: argument checks around the launchers of gdn.cu and gdn_chunked*.cu (sizes
// the kernels are built for, strides, alignment, the chunked path's workspace) and the routing.
#include "kernels/cuda/gdn.h"

#include <climits>
#include <cstdint>
#include <optional>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gdn_kernels.h"

namespace sparkserve::kernels::cuda {
namespace {

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

absl::Status CheckBatch(const char* op, const RaggedBatchDevice& batch) {
  if (batch.num_seqs < 0 || batch.num_seqs > kGdnMaxSeqs) {
    return absl::InvalidArgumentError(fmt::format("{}: num_seqs {} outside [0, {}]", op, batch.num_seqs, kGdnMaxSeqs));
  }
  if (batch.num_seqs > 0 &&
      (batch.token_begin == nullptr || batch.start_pos == nullptr || batch.slots == nullptr)) {
    return absl::InvalidArgumentError(fmt::format("{}: batch needs token_begin, start_pos and slots", op));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                              const RaggedBatchDevice& batch, float* window, float* column_window, int max_columns,
                              float* out, cudaStream_t stream) {
  constexpr const char* kOp = "CausalConv1dSilu";
  RETURN_IF_ERROR(CheckBatch(kOp, batch));
  if (K < 1 || K > kConvMaxKernel) {
    return absl::InvalidArgumentError(fmt::format("{}: kernel size K = {} outside [1, {}]", kOp, K, kConvMaxKernel));
  }
  if (channels < 1) return absl::InvalidArgumentError(fmt::format("{}: channels = {} < 1", kOp, channels));
  if (x_stride < channels) {
    return absl::InvalidArgumentError(fmt::format("{}: x_stride {} < channels {}", kOp, x_stride, channels));
  }
  if (x == nullptr || w == nullptr || out == nullptr || (window == nullptr && K > 1)) {
    return absl::InvalidArgumentError(fmt::format("{}: x, w, out and (for K > 1) window must be non-null", kOp));
  }
  if (column_window != nullptr && max_columns < 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: column_window given with max_columns = {} (needs >= 1)", kOp, max_columns));
  }
  if (batch.num_seqs == 0) return absl::OkStatus();
  return CudaStatus(LaunchCausalConv1dSilu(x, x_stride, channels, w, K, batch, window, column_window, max_columns,
                                           out, stream),
                    kOp);
}

size_t GdnWorkspaceBytes(const GdnShape& shape, int max_step_tokens, int max_seqs) {
  if (shape.nk < 1 || shape.nv < 1 || shape.dk < 1 || shape.dk > kGdnChunkedMaxDk || shape.dv < 4 ||
      shape.dv > kGdnMaxDv || shape.dv % 4 != 0 || max_step_tokens < 0 || max_seqs < 1 ||
      !GdnChunkedVariantFor(shape.dk, shape.dv).has_value()) {
    return 0;
  }
  return GdnChunkWorkspaceBytes(shape, max_step_tokens, max_seqs);
}

absl::Status GatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                           const float* norm_w, float eps, const RaggedBatchDevice& batch, GdnStateRef state,
                           float* column_state, int max_columns, __half* out, cudaStream_t stream,
                           const GdnWorkspace& workspace) {
  return GatedDeltaNetWith(GdnKernel::kAuto, in, shape, a_log, dt_bias, norm_w, eps, batch, state, column_state,
                           max_columns, out, stream, workspace);
}

absl::Status GatedDeltaNetWith(GdnKernel kernel, const GdnInput& in, const GdnShape& shape, const float* a_log,
                               const float* dt_bias, const float* norm_w, float eps, const RaggedBatchDevice& batch,
                               GdnStateRef state, float* column_state, int max_columns, __half* out,
                               cudaStream_t stream, const GdnWorkspace& workspace) {
  constexpr const char* kOp = "GatedDeltaNet";
  RETURN_IF_ERROR(CheckBatch(kOp, batch));
  const auto [nk, nv, dk, dv] = shape;
  if (nk < 1 || nv < 1 || nv % nk != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: needs nk >= 1 and nv a multiple of nk (nk {}, nv {})", kOp, nk, nv));
  }
  if (dk < 1 || dk > kGdnMaxDk) {
    return absl::InvalidArgumentError(fmt::format("{}: dk = {} outside [1, {}]", kOp, dk, kGdnMaxDk));
  }
  if (dv < 4 || dv > kGdnMaxDv || dv % 4 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: dv = {} must be a multiple of 4 in [4, {}] (float4 state columns, one cluster of {} "
                    "blocks x {} columns a head)",
                    kOp, dv, kGdnMaxDv, kGdnMaxSlices, kGdnSliceColumns));
  }
  const int64_t mixed_width = 2LL * nk * dk + static_cast<int64_t>(nv) * dv;
  if (in.mixed_stride < mixed_width) {
    return absl::InvalidArgumentError(
        fmt::format("{}: mixed_stride {} < 2 * nk * dk + nv * dv = {}", kOp, in.mixed_stride, mixed_width));
  }
  if (in.ab_stride < nv) {
    return absl::InvalidArgumentError(fmt::format("{}: ab_stride {} < nv {}", kOp, in.ab_stride, nv));
  }
  if (in.z_stride < nv * dv) {
    return absl::InvalidArgumentError(fmt::format("{}: z_stride {} < nv * dv = {}", kOp, in.z_stride, nv * dv));
  }
  if (in.mixed == nullptr || in.a == nullptr || in.b == nullptr || in.z == nullptr || a_log == nullptr ||
      dt_bias == nullptr || norm_w == nullptr || state.data == nullptr || out == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{}: mixed, a, b, z, a_log, dt_bias, norm_w, state and out must be non-null", kOp));
  }
  if (!(eps >= 0.0f)) return absl::InvalidArgumentError(fmt::format("{}: eps = {} must be >= 0", kOp, eps));
  if (column_state != nullptr && max_columns < 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: column_state given with max_columns = {} (needs >= 1)", kOp, max_columns));
  }
  if (column_state != nullptr && state.dtype != GdnStateDtype::kF32) {
    return absl::InvalidArgumentError(
        fmt::format("{}: column_state (MTP verify) needs an f32 state; this one is bf16", kOp));
  }
  if (!Aligned(state.data, 16) || (column_state != nullptr && !Aligned(column_state, 16))) {
    return absl::InvalidArgumentError(fmt::format("{}: state and column_state must be 16-byte aligned", kOp));
  }
  if (!Aligned(out, 8)) return absl::InvalidArgumentError(fmt::format("{}: out must be 8-byte aligned", kOp));
  const bool forced_chunked =
      kernel == GdnKernel::kChunked || kernel == GdnKernel::kChunkedSimt || kernel == GdnKernel::kChunkedSmall;
  if (forced_chunked && (column_state != nullptr || dk > kGdnChunkedMaxDk)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the chunked kernel needs column_state == nullptr and dk <= {} (dk {})", kOp,
                    kGdnChunkedMaxDk, dk));
  }
  if (forced_chunked && workspace.data == nullptr) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the chunked kernel needs a workspace (GdnWorkspace of GdnWorkspaceBytes(shape, tokens, seqs) = {} "
        "bytes for this step)", kOp, GdnChunkWorkspaceBytes(shape, batch.num_tokens, batch.num_seqs)));
  }
  // The recurrence's staging: the large variant where it fits, else the small one (kAuto, kChunked,
  // kChunkedSimt); kChunkedSmall forces the small one.
  const std::optional<GdnChunkedVariant> variant =
      kernel == GdnKernel::kChunkedSmall
          ? (GdnChunkedFitsDevice(dk, dv, GdnChunkedVariant::kSmall) ? std::optional(GdnChunkedVariant::kSmall)
                                                                     : std::nullopt)
          : GdnChunkedVariantFor(dk, dv);
  if (forced_chunked && !variant.has_value()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the chunked kernel needs {} bytes of shared memory a block, more than this device grants", kOp,
        GdnChunkedSmemBytes(dk, dv, GdnChunkedVariant::kSmall)));
  }
  if (kernel == GdnKernel::kDecode && column_state != nullptr) {
    return absl::InvalidArgumentError(fmt::format("{}: the decode kernel needs column_state == nullptr", kOp));
  }
  if (batch.num_seqs == 0) return absl::OkStatus();
  // Decode steps (1 token a seq, no MTP columns): the one-pass decode kernel (gdn_decode.cu).
  if (kernel == GdnKernel::kDecode ||
      (kernel == GdnKernel::kAuto && batch.max_seq_tokens == 1 && column_state == nullptr)) {
    return CudaStatus(LaunchGatedDeltaNetDecode(in, shape, a_log, dt_bias, norm_w, eps, batch, GdnDecodeLayout::kAuto,
                                                state, out, stream),
                      "GatedDeltaNet (decode)");
  }
  // Which seqs each kernel takes (gdn.h): the chunked path those of >= min_tokens tokens, the
  // sequential kernel those below skip_from (INT_MAX: all); the device decides per seq from its own
  // token count, so every seq is processed exactly once whatever max_seq_tokens says.
  bool run_sequential = true, run_chunked = false;
  int min_tokens = kGdnChunkedMinTokens;
  switch (kernel) {
    case GdnKernel::kAuto:
      run_chunked = workspace.data != nullptr && column_state == nullptr && dk <= kGdnChunkedMaxDk &&
                    batch.max_seq_tokens >= kGdnChunkedMinTokens && variant.has_value();
      break;
    case GdnKernel::kSequential:
    case GdnKernel::kDecode:  // launched above
      break;
    case GdnKernel::kChunked:
    case GdnKernel::kChunkedSimt:
    case GdnKernel::kChunkedSmall:
      run_sequential = false;
      run_chunked = true;
      min_tokens = 1;
      break;
  }
  if (run_chunked) {
    const size_t needed = GdnChunkWorkspaceBytes(shape, batch.num_tokens, batch.num_seqs);
    if (workspace.bytes < needed || !Aligned(workspace.data, 16)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: the workspace ({} bytes) must be 16-byte aligned and hold GdnWorkspaceBytes(shape, {} tokens, {} "
          "seqs) = {} bytes", kOp, workspace.bytes, batch.num_tokens, batch.num_seqs, needed));
    }
  }
  if (run_sequential) {
    RETURN_IF_ERROR(CudaStatus(LaunchGatedDeltaNet(in, shape, a_log, dt_bias, norm_w, eps, batch,
                                                   run_chunked ? min_tokens : INT_MAX, state, column_state,
                                                   max_columns, out, stream),
                               kOp));
  }
  if (run_chunked) {
    RETURN_IF_ERROR(CudaStatus(LaunchGatedDeltaNetChunked(in, shape, a_log, dt_bias, norm_w, eps, batch, min_tokens,
                                                          *variant, kernel == GdnKernel::kChunkedSimt, state, out,
                                                          workspace.data, workspace.bytes, stream),
                               "GatedDeltaNet (chunked)"));
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::kernels::cuda
