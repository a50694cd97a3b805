// Gated DeltaNet on CUDA over ragged steps (FORMATS.md §1): the causal depthwise conv1d + SiLU
// with its carried window, and the fused recurrence (q/k L2 norm, gates, delta rule, gated
// RMSNorm), sequential over a seq's tokens (decode) or chunked (prefill: gdn_chunked.cu). A seq
// whose start_pos is 0 starts from a zero window and state (no reset pass needed).
// CPU twins: kernels/cpu conv1d.cc, gated_delta.cc, norm.cc (L2NormalizeRows, GatedRmsNorm),
// activation.cc (GdnGates).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

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

// Per seq s, value head j (key head j / (nv / nk)), token t in order:
//   q = l2norm(q_t) * dk^-0.5, k = l2norm(k_t) (eps 1e-6 inside the rsqrt, as L2NormalizeRows)
//   g = -exp(a_log[j]) * softplus(a[t, j] + dt_bias[j]), beta = sigmoid(b[t, j])
//   S *= exp(g); delta = beta * (v_t - S^T k); S += k delta^T; o = S^T q
//   out[t, j, :] = norm_w * o / rms(o) * silu(z[t, j, :])   (eps `eps`), as f16
// mixed [T, *]: q at mixed[t * mixed_stride + h * dk] (h < nk), k after nk * dk, v after 2 * nk * dk
// (nv heads of dv); a, b at a[t * ab_stride + j], b[t * ab_stride + j]; z at z[t * z_stride + j * dv + i].
// state f32 [num_slots, nv, dk, dv] (zeros assumed when start_pos == 0); with keep_columns and a
// non-null column_state, column_state[slot, i] [nv, dk, dv] receives the state after token i.
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
//
// Two kernels compute it. The sequential one (a token at a time, the state in registers) serves
// decode and MTP verify; the chunked one (64 tokens at a time as matrix products) serves prefill.
// GatedDeltaNet picks from what the host knows: without column_state, when
// batch.max_seq_tokens >= kGdnChunkedMinTokens (gdn_kernels.h, 16) and dk <= 128, it launches
// both, and each seq is taken by exactly one of them, by its own token count on the device: seqs of
// >= kGdnChunkedMinTokens tokens by the chunked kernel, shorter ones (decode seqs of a mixed step)
// by the sequential kernel. Decode steps (max_seq_tokens == 1, no column_state) go to the decode
// kernel (kDecode below). Otherwise (MTP verify, steps of < 16 tokens a seq, prefill at dk > 128)
// the sequential kernel takes every seq.
absl::Status GatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                           const float* norm_w, float eps, const RaggedBatchDevice& batch, float* state,
                           float* column_state, int max_columns, __half* out, cudaStream_t stream);

// The same with the kernel chosen by the caller (tests, timing): kSequential takes every seq;
// kChunked / kChunkedSimt take every seq with >= 1 token (TF32 tensor-core tiles / f32 FMA tiles;
// they need column_state == nullptr and dk <= 128; a seq with no tokens keeps its state as it is).
// kDecode (gdn_decode.cu: one read + one write of the state) takes every seq of exactly 1 token and
// leaves the others (state and out rows) untouched; it needs column_state == nullptr. kAuto uses it
// for the whole step when batch.max_seq_tokens == 1 and column_state == nullptr (decode steps).
enum class GdnKernel { kAuto, kSequential, kChunked, kChunkedSimt, kDecode };
absl::Status GatedDeltaNetWith(GdnKernel kernel, const GdnInput& in, const GdnShape& shape, const float* a_log,
                               const float* dt_bias, const float* norm_w, float eps, const RaggedBatchDevice& batch,
                               float* state, float* column_state, int max_columns, __half* out, cudaStream_t stream);

}  // namespace sparkserve::kernels::cuda
