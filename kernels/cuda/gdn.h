// Gated DeltaNet on CUDA over ragged steps (FORMATS.md §1): the causal depthwise conv1d + SiLU
// with its carried window, and the fused recurrence (q/k L2 norm, gates, delta rule, gated
// RMSNorm), sequential over a seq's tokens (decode) or chunked (prefill: gdn_chunked*.cu). A seq
// whose start_pos is 0 starts from a zero window and state (no reset pass needed).
// CPU twins: kernels/cpu conv1d.cc, gated_delta.cc, norm.cc (L2NormalizeRows, GatedRmsNorm),
// activation.cc (GdnGates).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/ragged_batch.h"

namespace sparkserve::kernels::cuda {

// Per seq s (slot = batch.slots[s]) and channel c < channels:
//   out[t, c] = silu(sum_j w[c, j] * in[t - (K-1) + j, c]) with in[t, c] = x[t * x_stride + c] and
//   earlier inputs from window[slot, c, :] (oldest first; zeros when start_pos[s] == 0);
// window[slot] then holds the seq's last K-1 inputs. When batch.keep_columns[s] and column_window
// is non-null, column_window[slot, i] receives the window after token i of the seq.
// w f32 [channels, K]; window f32 [num_slots, channels, K-1];
// column_window f32 [num_slots, max_columns, channels, K-1]; out f32 [T, channels].
absl::Status CausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                              const RaggedBatchDevice& batch, float* window, float* column_window, int max_columns,
                              float* out, cudaStream_t stream);

struct GdnShape {
  int nk = 0, nv = 0, dk = 0, dv = 0;  // key heads, value heads (nv % nk == 0), head dims
};

// How the recurrent state is stored between steps: f32 (the model's own mamba_ssm_dtype), or bf16
// for half the memory and half the decode traffic (vLLM's --mamba-ssm-cache-dtype bfloat16). Every
// kernel widens the state to f32 when it loads it, runs the step's tokens in f32, and rounds the
// state to bf16 (nearest even) once when it stores it at the end of the step.
enum class GdnStateDtype { kF32, kBf16 };
inline size_t GdnStateDtypeBytes(GdnStateDtype d) { return d == GdnStateDtype::kBf16 ? 2 : 4; }

// A state buffer [num_slots, nv, dk, dv] and its dtype; the dtype follows the pointer's type.
struct GdnStateRef {
  void* data = nullptr;
  GdnStateDtype dtype = GdnStateDtype::kF32;
  GdnStateRef() = default;
  GdnStateRef(float* d) : data(d), dtype(GdnStateDtype::kF32) {}  // NOLINT(google-explicit-constructor)
  GdnStateRef(__nv_bfloat16* d) : data(d), dtype(GdnStateDtype::kBf16) {}  // NOLINT(google-explicit-constructor)
  GdnStateRef(void* d, GdnStateDtype t) : data(d), dtype(t) {}
};

// Per seq s, value head j (key head j / (nv / nk)), token t in order:
//   q = l2norm(q_t) * dk^-0.5, k = l2norm(k_t) (eps 1e-6 inside the rsqrt, as L2NormalizeRows)
//   g = -exp(a_log[j]) * softplus(a[t, j] + dt_bias[j]), beta = sigmoid(b[t, j])
//   S *= exp(g); delta = beta * (v_t - S^T k); S += k delta^T; o = S^T q
//   out[t, j, :] = norm_w * o / rms(o) * silu(z[t, j, :])   (eps `eps`), as f16
// mixed [T, *]: q at mixed[t * mixed_stride + h * dk] (h < nk), k after nk * dk, v after 2 * nk * dk
// (nv heads of dv); a, b at a[t * ab_stride + j], b[t * ab_stride + j]; z at z[t * z_stride + j * dv + i].
// state [num_slots, nv, dk, dv], f32 or bf16 (GdnStateRef; zeros assumed when start_pos == 0); with
// keep_columns and a non-null column_state (f32 state only), column_state[slot, i] [nv, dk, dv] f32
// receives the state after token i.
// out f16 [T, nv * dv].
struct GdnInput {
  const float* mixed = nullptr;
  int mixed_stride = 0;
  const float* a = nullptr;
  const float* b = nullptr;
  int ab_stride = 0;
  const float* z = nullptr;
  int z_stride = 0;
};

// Scratch of the chunked (prefill) path, owned by the caller and reused by every layer: per 64-token
// chunk and value head the prepared chunk (below), per token the pre-norm output. Allocate it once
// with GdnWorkspaceBytes(shape, most tokens of a step, most seqs of a step); any step within those
// sizes fits (a step needs GdnWorkspaceBytes(shape, batch.num_tokens, batch.num_seqs)). 16-byte
// aligned (cudaMalloc gives 256). Its contents need no initialisation and mean nothing between calls.
struct GdnWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};
// 0 when the chunked path cannot serve `shape` on the current device (dk > 128, or a device with
// less than the ~88 KB of shared memory a block its small variant needs). The same size for both
// variants (they read the same records). The 4B at 2048 tokens and 8 seqs: ~197 MB (40 chunk slots
// x 32 heads x 125 KB, plus 2048 x 4096 floats of O).
size_t GdnWorkspaceBytes(const GdnShape& shape, int max_step_tokens, int max_seqs);
//
// Two paths compute it. The sequential kernel (a token at a time, the state in registers) serves
// decode and MTP verify. The chunked path (prefill) takes 64 tokens at a time as matrix products, in
// three kernels (gdn_chunked_prep.cu, gdn_chunked.cu). Within a chunk (local t = 0..63, state S0 at
// its start, G_t = g_0 + .. + g_t, gamma_t = exp(G_t), A[t,s] = beta_t exp(G_t - G_s) k_t.k_s for
// s < t, T = (I + A)^-1):
//   delta = U - W S0          with W = T diag(beta gamma) K, U = T diag(beta) V
//   O     = diag(gamma) Q S0 + P delta,   P[t,s] = exp(G_t - G_s) q_t.k_s (s <= t)
//   S_n   = gamma_last S0 + K~^T delta,   K~ = diag(exp(G_last - G_t)) K
//  1. prep, parallel over (chunk, value head): norms, gates, A, T, W, U, P, K~, diag(gamma) Q into
//     the workspace;
//  2. recurrence, (32-column slice, value head, seq), sequential over the seq's chunks: the lines
//     above with the state slice on chip, the records streaming through shared memory in pieces
//     (whole W + Q / KT + P on sm_90 / sm_100; 32 columns / 16 tokens of them at a time, 86 KB a
//     block, on sm_120 / sm_121's 99 KB: gdn_kernels.h GdnChunkedVariant); O to the workspace, the
//     final state to `state`;
//  3. output, parallel over (chunk, value head): gated RMSNorm of O over dv, times silu(z), to f16.
// GatedDeltaNet picks from what the host knows: with a workspace, without column_state, when
// batch.max_seq_tokens >= kGdnChunkedMinTokens (gdn_kernels.h, 16), dk <= 128 and the device has the
// shared memory (either variant), it launches both, and each seq is taken by exactly one of them, by its own token
// count on the device: seqs of >= kGdnChunkedMinTokens tokens by the chunked path, shorter ones
// (decode seqs of a mixed step) by the sequential kernel. Decode steps (max_seq_tokens == 1, no
// column_state) go to the decode kernel (kDecode below). Otherwise (no workspace, MTP verify, steps
// of < 16 tokens a seq, dk > 128) the sequential kernel takes every seq. A workspace too small for the step is an
// InvalidArgument.
absl::Status GatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                           const float* norm_w, float eps, const RaggedBatchDevice& batch, GdnStateRef state,
                           float* column_state, int max_columns, __half* out, cudaStream_t stream,
                           const GdnWorkspace& workspace = {});

// The same with the kernel chosen by the caller (tests, timing): kSequential takes every seq;
// kChunked / kChunkedSimt take every seq with >= 1 token (TF32 tensor cores, 3xTF32 on the state
// path / every mma emulated with f32 FMAs from the same fragments: when only kChunked fails, suspect
// TF32 precision or the hardware fragment layout; when both fail, the indexing), with the variant
// kAuto picks (the large one where it fits); kChunkedSmall is kChunked forced to the small variant
// (sm_120's 99 KB) on any GPU: its results equal kChunked's bit for bit (same products, same order),
// so when only it fails, suspect its staging. They need a workspace (InvalidArgument without one),
// column_state == nullptr and dk <= 128; a seq with no tokens keeps its state as it is.
// kDecode (gdn_decode.cu: one read + one write of the state) takes every seq of exactly 1 token and
// leaves the others (state and out rows) untouched; it needs column_state == nullptr (no workspace).
// kAuto uses it for the whole step when batch.max_seq_tokens == 1 and column_state == nullptr.
enum class GdnKernel { kAuto, kSequential, kChunked, kChunkedSimt, kChunkedSmall, kDecode };
absl::Status GatedDeltaNetWith(GdnKernel kernel, const GdnInput& in, const GdnShape& shape, const float* a_log,
                               const float* dt_bias, const float* norm_w, float eps, const RaggedBatchDevice& batch,
                               GdnStateRef state, float* column_state, int max_columns, __half* out,
                               cudaStream_t stream, const GdnWorkspace& workspace = {});

}  // namespace sparkserve::kernels::cuda
