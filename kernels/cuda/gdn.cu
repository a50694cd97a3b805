// Gated DeltaNet kernels: the causal depthwise conv1d + SiLU with its carried window, and the fused
// recurrence (q/k L2 norm, gates, delta rule, gated RMSNorm -> f16), over ragged steps.
//
// GatedDeltaNet layout. A block (128 threads) owns 16 value columns of one (seq, value head) and
// keeps that [dk, 16] slice of the f32 state in registers for the whole step: thread (rg, cg) with
// cg = tid % 4, rg = tid / 4 holds columns 4cg..4cg+3 (one float4) of rows rg, rg + 32, ... so each
// warp instruction reads/writes 8 rows x 64 contiguous bytes. The state is read once at the start
// and written once at the end (plus once per token into the column buffers when asked). The value
// columns of the delta rule are independent (kv = S^T k, delta and the update are per column), so
// slices need no communication except the gated RMSNorm over dv: the ceil(dv/16) blocks of a head
// are one thread-block cluster and add their per-token sums of o^2 through distributed shared
// memory. At decode the 4B (nv 32, dv 128) runs 256 blocks a seq, enough to cover 132 SMs at
// batch 1 with every state load of the step in flight at once.
//
// Per token one block-wide reduction gives, per column, S^T k_raw and S^T q_raw together with
// |k_raw|^2, |q_raw|^2 and q_raw.k_raw; with k = k_raw / |k_raw|, q = q_raw * scale / |q_raw|:
//   kv = decay * S^T k, delta = beta * (v - kv),
//   o = S_new^T q = decay * S^T q + (k.q) * delta       (S_new = decay * S + k delta^T)
// which is the reference recurrence with a single reduction instead of two.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/cuda/gdn_kernels.h"
#include "kernels/cuda/gdn_math.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

namespace cg = cooperative_groups;


// ---- CausalConv1dSilu ----
// The conv is no recurrence: the window before token i of a seq is its inputs i-K+1..i-1, taken
// from the carried window only for the first K-1 tokens. So a thread owns one (seq, channel, chunk
// of kConvChunk tokens) and starts from x, except chunk 0, which alone reads the slot's window and
// alone writes the new one (the last K-1 inputs of [old window | the seq's tokens]): no two threads
// touch a window. Grid z covers max_seq_tokens; the last z chunk runs to the seq's end whatever it
// is, so a seq longer than max_seq_tokens is still complete (just less parallel).

constexpr int kConvThreads = 128;
constexpr int kConvChunk = 32;  // >= K - 1: chunks after the first never need the carried window
constexpr int kConvMaxChunks = 65535;  // grid.z
static_assert(kConvChunk >= kConvMaxKernel - 1);

template <int K>
__global__ void __launch_bounds__(kConvThreads)
    CausalConv1dSiluKernel(const float* __restrict__ x, int x_stride, int channels, const float* __restrict__ w,
                           const RaggedBatchDevice batch, float* __restrict__ window,
                           float* __restrict__ column_window, int max_columns, float* __restrict__ out) {
  WaitForPriorGrids();
  AllowNextGrid();
  constexpr int W = K - 1;
  const int s = static_cast<int>(blockIdx.y);
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= channels) return;
  const int t0 = batch.token_begin[s], n = batch.token_begin[s + 1] - t0;
  const bool first_chunk = blockIdx.z == 0;
  const int begin = static_cast<int>(blockIdx.z) * kConvChunk;  // seq-relative token range of this thread
  if (!first_chunk && begin >= n) return;
  const int end = blockIdx.z + 1 == gridDim.z ? n : min(n, begin + kConvChunk);
  const int slot = batch.slots[s];
  const bool keep = column_window != nullptr && batch.keep_columns != nullptr && batch.keep_columns[s] != 0;
  float* win = window + (static_cast<size_t>(slot) * channels + c) * W;
  float* cols = keep ? column_window + static_cast<size_t>(slot) * max_columns * channels * W +
                           static_cast<size_t>(c) * W
                     : nullptr;
  const size_t column_step = static_cast<size_t>(channels) * W;
  const float* xc = x + static_cast<size_t>(t0) * x_stride + c;  // xc[i * x_stride]: input of seq token i

  float wc[K];
#pragma unroll
  for (int j = 0; j < K; ++j) wc[j] = __ldg(w + static_cast<size_t>(c) * K + j);
  // buf[0..W-1]: the inputs before token `begin` (oldest first); buf[W]: the current input.
  float buf[K];
  float old[K];  // chunk 0: the carried window (zeros for a fresh seq)
#pragma unroll
  for (int j = 0; j < W; ++j) {
    if (first_chunk) {
      old[j] = batch.start_pos[s] == 0 ? 0.0f : win[j];
      buf[j] = old[j];
    } else {
      buf[j] = __ldg(xc + static_cast<size_t>(begin - W + j) * x_stride);  // begin >= kConvChunk >= W
    }
  }

#pragma unroll 4
  for (int i = begin; i < end; ++i) {
    buf[W] = __ldg(xc + static_cast<size_t>(i) * x_stride);
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < K; ++j) acc += wc[j] * buf[j];
    out[static_cast<size_t>(t0 + i) * channels + c] = SiluF(acc);
#pragma unroll
    for (int j = 0; j < W; ++j) buf[j] = buf[j + 1];
    if (cols != nullptr && i < max_columns) {
#pragma unroll
      for (int j = 0; j < W; ++j) cols[i * column_step + j] = buf[j];
    }
  }

  if (first_chunk) {
    // Element j of the new window is element n + j of [old window (W) | the seq's n inputs].
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const int e = n + j;
      float v = 0.0f;
      if (e >= W) {
        v = __ldg(xc + static_cast<size_t>(e - W) * x_stride);
      } else {
#pragma unroll
        for (int u = 0; u < W; ++u) v = u == e ? old[u] : v;  // register select, no local memory
      }
      win[j] = v;
    }
  }
}

template <int K>
cudaError_t LaunchConv(const float* x, int x_stride, int channels, const float* w, const RaggedBatchDevice& batch,
                       float* window, float* column_window, int max_columns, float* out, cudaStream_t stream) {
  const int chunks = std::min(kConvMaxChunks, (std::max(batch.max_seq_tokens, 1) + kConvChunk - 1) / kConvChunk);
  const dim3 grid((channels + kConvThreads - 1) / kConvThreads, batch.num_seqs, chunks);
  LaunchStepKernel(CausalConv1dSiluKernel<K>, dim3(grid), dim3(kConvThreads), 0, stream, x, x_stride, channels, w,
                   batch, window, column_window, max_columns, out);
  return cudaGetLastError();
}

// ---- GatedDeltaNet ----

constexpr int kGdnThreads = 128;
constexpr int kGdnWarps = kGdnThreads / 32;
constexpr int kColGroups = kGdnSliceColumns / 4;      // float4 column groups a block (4)
constexpr int kRowGroups = kGdnThreads / kColGroups;  // threads sharing a column group (32)
// Reduced per token and column group: S^T k_raw (4), S^T q_raw (4), |k|^2, |q|^2, q.k, padding.
constexpr int kRed = 12;
static_assert(kRowGroups == 32, "row groups are lane bits 2..4 and the 4 warps");

struct GdnParams : GdnLayerParams {
  int skip_from_tokens;  // seqs this long are the chunked kernel's
  float* column_state;
  int max_columns;
};

// One token's inputs as a thread needs them: q/k of its rows, v/z of its 4 columns, the gate inputs.
template <int M>
struct TokenInputs {
  float q[M], k[M];
  float4 v, z;
  float a, b;
};

template <int M>
__device__ __forceinline__ void LoadToken(const GdnParams& p, int t, int kh, int j, int rg, int col, bool col_ok,
                                          TokenInputs<M>& in) {
  const float* row = p.mixed + static_cast<size_t>(t) * p.mixed_stride;
  const float* qh = row + kh * p.dk;
  const float* kh_ptr = row + (p.nk + kh) * p.dk;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = rg + kRowGroups * m;
    const bool ok = i < p.dk;
    in.q[m] = ok ? __ldg(qh + i) : 0.0f;
    in.k[m] = ok ? __ldg(kh_ptr + i) : 0.0f;
  }
  if (col_ok) {
    const float* v = row + 2 * p.nk * p.dk + j * p.dv + col;
    const float* z = p.z + static_cast<size_t>(t) * p.z_stride + j * p.dv + col;
    in.v = make_float4(__ldg(v), __ldg(v + 1), __ldg(v + 2), __ldg(v + 3));
    in.z = make_float4(__ldg(z), __ldg(z + 1), __ldg(z + 2), __ldg(z + 3));
  } else {
    in.v = in.z = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  in.a = __ldg(p.a + static_cast<size_t>(t) * p.ab_stride + j);
  in.b = __ldg(p.b + static_cast<size_t>(t) * p.ab_stride + j);
}

__device__ __forceinline__ float& Lane(float4& v, int x) { return x == 0 ? v.x : x == 1 ? v.y : x == 2 ? v.z : v.w; }

// grid (slices, nv, num_seqs), cluster (slices, 1, 1); M = rows a thread holds (dk <= 32 * M).
template <int M>
__global__ void __launch_bounds__(kGdnThreads) GatedDeltaNetKernel(const GdnParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  const cg::cluster_group cluster = cg::this_cluster();
  __shared__ __align__(16) float red[2][kGdnWarps][kColGroups][kRed];  // double-buffered by token parity
  __shared__ float sumsq[2];                                            // this slice's sum of o^2, same

  const int slice = static_cast<int>(blockIdx.x);  // == cluster rank: the cluster spans grid.x
  const int slices = static_cast<int>(gridDim.x);
  const int j = static_cast<int>(blockIdx.y);
  const int s = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int cgi = tid % kColGroups, rg = tid / kColGroups;
  const int col = slice * kGdnSliceColumns + 4 * cgi;  // first of this thread's 4 value columns
  const bool col_ok = col < p.dv;                       // dv % 4 == 0: all 4 or none
  const int kh = j / (p.nv / p.nk);

  const int t0 = p.batch.token_begin[s], t1 = p.batch.token_begin[s + 1];
  if (t1 - t0 >= p.skip_from_tokens) return;  // before any cluster barrier; the same for the whole cluster
  const int slot = p.batch.slots[s];
  const bool fresh = p.batch.start_pos[s] == 0;
  const bool keep =
      p.column_state != nullptr && p.batch.keep_columns != nullptr && p.batch.keep_columns[s] != 0;
  const size_t head_state = static_cast<size_t>(p.dk) * p.dv;
  const size_t slot_state = head_state * p.nv;
  const size_t state0 = static_cast<size_t>(slot) * slot_state + j * head_state + col;  // element of (i = 0, col)

  float4 S[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = rg + kRowGroups * m;
    S[m] = (!fresh && col_ok && i < p.dk) ? LoadGdnState4(p.state, state0 + static_cast<size_t>(i) * p.dv, p.state_bf16)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const float a_scale = expf(__ldg(p.a_log + j));
  const float dt_bias = __ldg(p.dt_bias + j);
  float4 norm_w = make_float4(0.f, 0.f, 0.f, 0.f);
  if (col_ok) {
    const float* nw = p.norm_w + col;
    norm_w = make_float4(__ldg(nw), __ldg(nw + 1), __ldg(nw + 2), __ldg(nw + 3));
  }

  TokenInputs<M> cur, next;
  if (t0 < t1) LoadToken<M>(p, t0, kh, j, rg, col, col_ok, cur);
  for (int t = t0; t < t1; ++t) {
    const int parity = (t - t0) & 1;
    if (t + 1 < t1) LoadToken<M>(p, t + 1, kh, j, rg, col, col_ok, next);  // in flight during this token

    // Partial sums over this thread's rows, then over the 32 row groups (lane bits 2..4, warps).
    float r[kRed];
#pragma unroll
    for (int v = 0; v < kRed; ++v) r[v] = 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        r[x] = fmaf(Lane(S[m], x), cur.k[m], r[x]);
        r[4 + x] = fmaf(Lane(S[m], x), cur.q[m], r[4 + x]);
      }
      r[8] = fmaf(cur.k[m], cur.k[m], r[8]);
      r[9] = fmaf(cur.q[m], cur.q[m], r[9]);
      r[10] = fmaf(cur.q[m], cur.k[m], r[10]);
    }
#pragma unroll
    for (int off = kColGroups; off < 32; off *= 2) {
#pragma unroll
      for (int v = 0; v < 11; ++v) r[v] += __shfl_xor_sync(0xffffffffu, r[v], off);
    }
    if (lane < kColGroups) {  // lane == cgi here
      float4* dst = reinterpret_cast<float4*>(red[parity][warp][lane]);
      dst[0] = make_float4(r[0], r[1], r[2], r[3]);
      dst[1] = make_float4(r[4], r[5], r[6], r[7]);
      dst[2] = make_float4(r[8], r[9], r[10], 0.0f);
    }
    // red[parity] is rewritten two tokens later, after every thread has passed the next token's
    // __syncthreads (so after all reads of this token's values).
    __syncthreads();
    float4 sk = make_float4(0.f, 0.f, 0.f, 0.f), sq = sk, norms = sk;
#pragma unroll
    for (int w = 0; w < kGdnWarps; ++w) {
      const float4* src = reinterpret_cast<const float4*>(red[parity][w][cgi]);
      const float4 a0 = src[0], a1 = src[1], a2 = src[2];
      sk.x += a0.x, sk.y += a0.y, sk.z += a0.z, sk.w += a0.w;
      sq.x += a1.x, sq.y += a1.y, sq.z += a1.z, sq.w += a1.w;
      norms.x += a2.x, norms.y += a2.y, norms.z += a2.z;
    }

    const float inv_k = rsqrtf(norms.x + 1e-6f);
    const float inv_q = rsqrtf(norms.y + 1e-6f) * p.q_scale;
    const float kq = norms.z * inv_k * inv_q;  // normalised k.q
    const float ax = cur.a + dt_bias;
    const float decay = expf(GdnLogDecay(ax, a_scale));
    const float beta = GdnBeta(cur.b);
    float4 delta = make_float4(0.f, 0.f, 0.f, 0.f), o = delta;
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const float kv = decay * inv_k * Lane(sk, x);
      Lane(delta, x) = beta * (Lane(cur.v, x) - kv);
      Lane(o, x) = fmaf(kq, Lane(delta, x), decay * inv_q * Lane(sq, x));
    }
    // This slice's sum of o^2 (the 4 column groups are lanes 4k..4k+3 of every warp); invalid
    // columns have v = 0 and S = 0, so o = 0 there.
    float ss = o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w;
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    if (tid == 0) sumsq[parity] = ss;
    // Release sumsq[parity] to the cluster; the state update overlaps the barrier. sumsq[parity] is
    // rewritten two tokens later, after the next token's barrier, which every block reaches only
    // after reading this token's sums.
    auto arrival = cluster.barrier_arrive();

#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float kn = cur.k[m] * inv_k;
#pragma unroll
      for (int x = 0; x < 4; ++x) Lane(S[m], x) = fmaf(kn, Lane(delta, x), decay * Lane(S[m], x));
    }
    const int column = t - t0;
    if (keep && column < p.max_columns && col_ok) {
      float* cs = p.column_state + (static_cast<size_t>(slot) * p.max_columns + column) * slot_state +
                  j * head_state + col;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = rg + kRowGroups * m;
        if (i < p.dk) *reinterpret_cast<float4*>(cs + static_cast<size_t>(i) * p.dv) = S[m];
      }
    }

    cluster.barrier_wait(std::move(arrival));
    float total = 0.0f;
    for (int r2 = 0; r2 < slices; ++r2) total += *cluster.map_shared_rank(&sumsq[parity], r2);
    if (rg == 0 && col_ok) {
      const float inv_rms = rsqrtf(total / static_cast<float>(p.dv) + p.eps);
      float y[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        y[x] = SaturateToHalfRange((Lane(norm_w, x) * (Lane(o, x) * inv_rms)) * SiluF(Lane(cur.z, x)));
      }
      const __half2 lo = __floats2half2_rn(y[0], y[1]), hi = __floats2half2_rn(y[2], y[3]);
      __half* dst = p.out + (static_cast<size_t>(t) * p.nv + j) * p.dv + col;  // 8-byte aligned (checked)
      *reinterpret_cast<uint2*>(dst) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
    cur = next;
  }
  // No block may exit while a peer can still read its sumsq (the last token's reads).
  cluster.sync();

  if (col_ok) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = rg + kRowGroups * m;
      if (i < p.dk) StoreGdnState4(p.state, state0 + static_cast<size_t>(i) * p.dv, S[m], p.state_bf16);
    }
  }
}

template <int M>
cudaError_t LaunchGdn(const GdnParams& p, int slices, cudaStream_t stream) {
  return LaunchStepKernelInClusters(GatedDeltaNetKernel<M>, dim3(slices, p.nv, p.batch.num_seqs), dim3(kGdnThreads), 0,
                                    stream, static_cast<unsigned>(slices), p);
}

}  // namespace

cudaError_t LaunchCausalConv1dSilu(const float* x, int x_stride, int channels, const float* w, int K,
                                   const RaggedBatchDevice& batch, float* window, float* column_window,
                                   int max_columns, float* out, cudaStream_t stream) {
  switch (K) {
    case 1: return LaunchConv<1>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 2: return LaunchConv<2>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 3: return LaunchConv<3>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 4: return LaunchConv<4>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 5: return LaunchConv<5>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 6: return LaunchConv<6>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 7: return LaunchConv<7>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    case 8: return LaunchConv<8>(x, x_stride, channels, w, batch, window, column_window, max_columns, out, stream);
    default: return cudaErrorInvalidValue;
  }
}

GdnLayerParams MakeGdnLayerParams(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                  const float* norm_w, float eps, const RaggedBatchDevice& batch, GdnStateRef state,
                                  __half* out) {
  GdnLayerParams p;
  p.mixed = in.mixed;
  p.mixed_stride = in.mixed_stride;
  p.a = in.a;
  p.b = in.b;
  p.ab_stride = in.ab_stride;
  p.z = in.z;
  p.z_stride = in.z_stride;
  p.nk = shape.nk;
  p.nv = shape.nv;
  p.dk = shape.dk;
  p.dv = shape.dv;
  p.a_log = a_log;
  p.dt_bias = dt_bias;
  p.norm_w = norm_w;
  p.eps = eps;
  p.q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.dk)));
  p.batch = batch;
  p.state = state.data;
  p.state_bf16 = state.dtype == GdnStateDtype::kBf16;
  p.out = out;
  return p;
}

cudaError_t LaunchGatedDeltaNet(const GdnInput& in, const GdnShape& shape, const float* a_log, const float* dt_bias,
                                const float* norm_w, float eps, const RaggedBatchDevice& batch, int skip_from_tokens,
                                GdnStateRef state, float* column_state, int max_columns, __half* out,
                                cudaStream_t stream) {
  GdnParams p;
  static_cast<GdnLayerParams&>(p) = MakeGdnLayerParams(in, shape, a_log, dt_bias, norm_w, eps, batch, state, out);
  p.skip_from_tokens = skip_from_tokens;
  p.column_state = column_state;
  p.max_columns = max_columns;
  const int slices = (shape.dv + kGdnSliceColumns - 1) / kGdnSliceColumns;
  if (shape.dk <= 32) return LaunchGdn<1>(p, slices, stream);
  if (shape.dk <= 64) return LaunchGdn<2>(p, slices, stream);
  if (shape.dk <= 128) return LaunchGdn<4>(p, slices, stream);
  if (shape.dk <= 256) return LaunchGdn<8>(p, slices, stream);
  return cudaErrorInvalidValue;
}

}  // namespace sparkserve::kernels::cuda
