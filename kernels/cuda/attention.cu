// Gated full attention over the paged KV cache (bf16 or fp8): split-K paged attention with a
// combine that applies the sigmoid gate (the q/k norm + RoPE + KV write that precedes it is in
// qk_norm_rope.cu, the tensor-core prefill kernel in prefill_attention.cu).
//
// PagedAttention lane layout: a key is read by L lanes (L = head_dim / 8 rounded up to a power of
// two), each holding 8 dims (one 16-byte bf16 or 8-byte fp8 load of K and of V); a warp so holds
// 32 / L "key groups" that walk different keys. A block handles one kv head and up to G of its query heads, so
// every K/V byte it reads serves the whole GQA group, over one split of the context:
//   - per-token path (seqs with <= kPerTokenMaxTokens tokens this step: decode, MTP verify): one
//     query token, all 8 warps split the keys, loading K/V straight from global memory; the warps'
//     softmax states merge through shared memory at the end;
//   - tile path (longer prefill chunks): 8 consecutive tokens of a seq, one warp each; K/V tiles of
//     KT keys are staged in shared memory once for the 8 warps (causal mask per warp).
// Scores live in log2 units (q is pre-scaled by scale * log2 e) and softmax runs online per chunk
// of 4 keys a key group. With more than one split each block writes its unnormalised state
// (acc, m, l) to the workspace and CombineSplitsKernel merges the splits; with one split the
// attention kernel normalises, gates and writes f16 itself. FP8 pools: q is pre-multiplied by
// k_scale and the output (or split partial) by v_scale, so the loops see the raw e4m3 values.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_kv.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// PagedAttention

constexpr int kAttnWarps = 8;
constexpr int kAttnThreads = kAttnWarps * 32;
constexpr int kChunk = 4;  // keys a key group takes per online-softmax step

struct AttnParams : AttentionCall {
  int head_groups;   // blocks per kv head
  float scale_log2;  // scale * log2(e) (* k_scale for fp8)
  SplitKSeqs seqs;   // which seqs' tokens this kernel writes (the others: other kernels)
  SplitPartials ws;
  int num_splits;
};

// One online-softmax step of a key group over kChunk keys (k/v: this lane's 8 dims of each key,
// zero when absent; valid[c]: key c takes part). Scores are summed over the L lanes of the group
// with xor shuffles, so every lane of the group holds them (and the same m, l). All 32 lanes of the
// warp must call this together.
template <typename Kv, int L, int G>
__device__ __forceinline__ void OnlineSoftmaxStep(const float (&q)[G][8], const typename Kv::Vec8 (&k)[kChunk],
                                                  const typename Kv::Vec8 (&v)[kChunk], const bool (&valid)[kChunk],
                                                  float (&m)[G], float (&l)[G], float (&acc)[G][8]) {
  float s[kChunk][G];
#pragma unroll
  for (int c = 0; c < kChunk; ++c) {
    float kf[8];
    Kv::ToF32(k[c], kf);
#pragma unroll
    for (int i = 0; i < G; ++i) {
      float d = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) d += q[i][j] * kf[j];
      s[c][i] = d;
    }
  }
#pragma unroll
  for (int off = L / 2; off >= 1; off /= 2) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
#pragma unroll
      for (int i = 0; i < G; ++i) s[c][i] += __shfl_xor_sync(kFullMask, s[c][i], off);
    }
  }
#pragma unroll
  for (int i = 0; i < G; ++i) {
    float mx = m[i];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (!valid[c]) s[c][i] = -INFINITY;
      mx = fmaxf(mx, s[c][i]);
    }
    const float base = mx == -INFINITY ? 0.f : mx;  // nothing seen yet: keep everything at 0
    const float alpha = exp2f(m[i] - base);
    l[i] *= alpha;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] *= alpha;
    m[i] = mx;
  }
#pragma unroll
  for (int c = 0; c < kChunk; ++c) {
    float vf[8];
    Kv::ToF32(v[c], vf);
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const float p = exp2f(s[c][i] - (m[i] == -INFINITY ? 0.f : m[i]));
      l[i] += p;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += p * vf[j];
    }
  }
}

// Merges the key groups of a warp (lanes L apart hold the same dims): afterwards every lane holds
// the warp's state for its dims.
template <int L, int G>
__device__ __forceinline__ void MergeKeyGroups(float (&m)[G], float (&l)[G], float (&acc)[G][8]) {
#pragma unroll 1
  for (int off = L; off < 32; off *= 2) {
#pragma unroll
    for (int i = 0; i < G; ++i) {
      const float om = __shfl_xor_sync(kFullMask, m[i], off);
      const float ol = __shfl_xor_sync(kFullMask, l[i], off);
      float oacc[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) oacc[j] = __shfl_xor_sync(kFullMask, acc[i][j], off);
      const float mx = fmaxf(m[i], om);
      const float base = mx == -INFINITY ? 0.f : mx;
      const float fa = exp2f(m[i] - base), fb = exp2f(om - base);
      l[i] = l[i] * fa + ol * fb;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = acc[i][j] * fa + oacc[j] * fb;
      m[i] = mx;
    }
  }
}

// out[t, h, d] = acc / l * sigmoid(gate[t, h, d]) as f16.
__device__ __forceinline__ void StoreGated(const AttnParams& p, int t, int h, int d, float acc, float l) {
  const float g = p.gate[static_cast<size_t>(t) * p.gate_row_stride + static_cast<size_t>(h) * p.gate_head_stride + d];
  const float y = (acc / l) / (1.0f + __expf(-g));
  p.out[(static_cast<size_t>(t) * p.heads + h) * p.kv.head_dim + d] = __float2half_rn(y);
}

// One element of a block's result for (token t, query head h, dim d) with the softmax state (m, l):
// the gated output when the context is not split, else this split's partial. acc is in units of
// the stored V (v_mul turns it into values).
__device__ __forceinline__ void EmitElement(const AttnParams& p, int split, int t, int h, int d, float acc, float m,
                                            float l) {
  acc *= p.v_mul;
  if (p.num_splits == 1) {
    StoreGated(p, t, h, d, acc, l);
    return;
  }
  const size_t row = (static_cast<size_t>(split) * p.batch.num_tokens + t) * p.heads + h;
  p.ws.acc[row * p.kv.head_dim + d] = acc;
  if (d == 0) {
    p.ws.m[row] = m;
    p.ws.l[row] = l;
  }
}

// Keys [a, b) of this split for a query whose context is [0, ctx): splits take whole multiples of
// the block's key step so no split starts mid-step.
__device__ __forceinline__ void SplitRange(int ctx, int split, int num_splits, int step, int& a, int& b) {
  const int per = (ctx + num_splits - 1) / num_splits;
  const int chunk = (per + step - 1) / step * step;
  a = split * chunk;
  b = min(ctx, a + chunk);
}

// Loads this lane's 8 dims of query heads [h0, h0 + ng) of token t, pre-scaled; zero elsewhere.
template <int G>
__device__ __forceinline__ void LoadQuery(const AttnParams& p, int t, int h0, int ng, int d0, bool dim_ok,
                                          float (&q)[G][8]) {
#pragma unroll
  for (int i = 0; i < G; ++i) {
    if (dim_ok && i < ng) {
      const float4* src = reinterpret_cast<const float4*>(
          p.q + (static_cast<size_t>(t) * p.heads + h0 + i) * p.kv.head_dim + d0);
      const float4 x0 = src[0], x1 = src[1];
      q[i][0] = x0.x * p.scale_log2;
      q[i][1] = x0.y * p.scale_log2;
      q[i][2] = x0.z * p.scale_log2;
      q[i][3] = x0.w * p.scale_log2;
      q[i][4] = x1.x * p.scale_log2;
      q[i][5] = x1.y * p.scale_log2;
      q[i][6] = x1.z * p.scale_log2;
      q[i][7] = x1.w * p.scale_log2;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) q[i][j] = 0.f;
    }
  }
}

// Per-token path: token t, all warps over this split's keys from global memory, merged in shared
// memory (smem: m [warps][G], l [warps][G], acc [warps][G][hd]).
template <typename Kv, int L, int G>
__device__ __forceinline__ void AttendOneToken(const AttnParams& p, int t, int seq, int g, int h0, int ng,
                                               float* smem) {
  constexpr int kGroups = 32 / L;                             // key groups a warp
  constexpr int kWarpStep = kGroups * kChunk;                 // keys a warp takes per step
  constexpr int kBlockStep = kAttnWarps * kWarpStep;          // keys the block takes per step
  const int hd = p.kv.head_dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kg = lane / L, d0 = (lane % L) * 8;
  const bool dim_ok = d0 < hd;
  const int ctx = p.batch.positions[t] + 1;
  int a, b;
  SplitRange(ctx, blockIdx.z, p.num_splits, kBlockStep, a, b);

  float q[G][8], m[G], l[G], acc[G][8];
  LoadQuery<G>(p, t, h0, ng, d0, dim_ok, q);
#pragma unroll
  for (int i = 0; i < G; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  }
  const int32_t* pages = p.batch.page_table + static_cast<size_t>(seq) * p.batch.pages_stride;
  const size_t head_off = static_cast<size_t>(g) * hd + d0;
  const uint8_t* pool_k = static_cast<const uint8_t*>(p.kv.k);
  const uint8_t* pool_v = static_cast<const uint8_t*>(p.kv.v);
  for (int wb = a + warp * kWarpStep; wb < b; wb += kBlockStep) {  // warp-uniform trip count
    typename Kv::Vec8 k[kChunk], v[kChunk];
    bool valid[kChunk];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int pos = wb + kg * kChunk + c;
      valid[c] = pos < b;
      if (valid[c] && dim_ok) {
        const size_t off = (KvRowOffset(p.kv, pages, pos) + head_off) * Kv::kBytes;
        k[c] = Kv::LoadStreaming8(pool_k + off);
        v[c] = Kv::LoadStreaming8(pool_v + off);
      } else {
        k[c] = Kv::Zero();
        v[c] = Kv::Zero();
      }
    }
    OnlineSoftmaxStep<Kv, L, G>(q, k, v, valid, m, l, acc);
  }
  MergeKeyGroups<L, G>(m, l, acc);

  float* sm_m = smem;                        // [warps][G]
  float* sm_l = sm_m + kAttnWarps * G;       // [warps][G]
  float* sm_acc = sm_l + kAttnWarps * G;     // [warps][G][hd]
  if (lane < L && dim_ok) {
#pragma unroll
    for (int i = 0; i < G; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) sm_acc[(warp * G + i) * hd + d0 + j] = acc[i][j];
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < G; ++i) {
      sm_m[warp * G + i] = m[i];
      sm_l[warp * G + i] = l[i];
    }
  }
  __syncthreads();
  for (int item = threadIdx.x; item < ng * hd; item += blockDim.x) {
    const int i = item / hd, d = item % hd;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) mx = fmaxf(mx, sm_m[w * G + i]);
    const float base = mx == -INFINITY ? 0.f : mx;
    float lsum = 0.f, asum = 0.f;
    for (int w = 0; w < kAttnWarps; ++w) {
      const float f = exp2f(sm_m[w * G + i] - base);
      lsum += sm_l[w * G + i] * f;
      asum += sm_acc[(w * G + i) * hd + d] * f;
    }
    EmitElement(p, blockIdx.z, t, h0 + i, d, asum, mx, lsum);
  }
}

// Tile path: tokens [t0, t0 + nq) of one seq (nq <= warps), warp w for token t0 + w; K/V tiles of
// kTileKeys keys staged in shared memory (smem: K [kTileKeys][hd] then V, pool elements).
template <typename Kv, int L, int G>
__device__ __forceinline__ void AttendTokenTile(const AttnParams& p, int t0, int nq, int seq, int g, int h0, int ng,
                                                uint4* smem) {
  constexpr int kGroups = 32 / L;
  constexpr int kWarpStep = kGroups * kChunk;
  constexpr int kTileKeys = kAttnWarps * kWarpStep;  // 1024 / L: 32 KiB of K + V at most
  const int hd = p.kv.head_dim;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kg = lane / L, d0 = (lane % L) * 8;
  const bool dim_ok = d0 < hd;
  const bool active = warp < nq;
  const int qpos = active ? p.batch.positions[t0 + warp] : -1;
  const int ctx = p.batch.positions[t0 + nq - 1] + 1;
  int a, b;
  SplitRange(ctx, blockIdx.z, p.num_splits, kTileKeys, a, b);

  float q[G][8], m[G], l[G], acc[G][8];
  LoadQuery<G>(p, active ? t0 + warp : t0, h0, active ? ng : 0, d0, dim_ok, q);
#pragma unroll
  for (int i = 0; i < G; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  }
  const int32_t* pages = p.batch.page_table + static_cast<size_t>(seq) * p.batch.pages_stride;
  const int vecs = hd / 8;  // 8-element vectors a key row
  const int row_bytes = hd * Kv::kBytes;
  const uint8_t* pool_k = static_cast<const uint8_t*>(p.kv.k);
  const uint8_t* pool_v = static_cast<const uint8_t*>(p.kv.v);
  uint8_t* sk = reinterpret_cast<uint8_t*>(smem);
  uint8_t* sv = sk + kTileKeys * row_bytes;
  for (int kb = a; kb < b; kb += kTileKeys) {  // block-uniform
    for (int x = threadIdx.x; x < kTileKeys * vecs; x += blockDim.x) {
      const int j = x / vecs, c = x % vecs;
      typename Kv::Vec8 kx = Kv::Zero(), vx = Kv::Zero();
      if (kb + j < b) {
        const size_t off = (KvRowOffset(p.kv, pages, kb + j) + static_cast<size_t>(g) * hd + c * 8) * Kv::kBytes;
        kx = Kv::LoadGlobal8(pool_k + off);
        vx = Kv::LoadGlobal8(pool_v + off);
      }
      Kv::StoreShared8(sk + j * row_bytes + c * 8 * Kv::kBytes, kx);
      Kv::StoreShared8(sv + j * row_bytes + c * 8 * Kv::kBytes, vx);
    }
    __syncthreads();
    // Warp-uniform bounds: the warp stops at its own query position (causal) and at b.
    for (int wb = 0; wb < kTileKeys && kb + wb < b && kb + wb <= qpos; wb += kWarpStep) {
      typename Kv::Vec8 k[kChunk], v[kChunk];
      bool valid[kChunk];
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const int j = wb + kg * kChunk + c;  // < kTileKeys
        valid[c] = kb + j < b && kb + j <= qpos;
        if (dim_ok) {
          k[c] = Kv::LoadShared8(sk + j * row_bytes + d0 * Kv::kBytes);
          v[c] = Kv::LoadShared8(sv + j * row_bytes + d0 * Kv::kBytes);
        } else {
          k[c] = Kv::Zero();
          v[c] = Kv::Zero();
        }
      }
      OnlineSoftmaxStep<Kv, L, G>(q, k, v, valid, m, l, acc);
    }
    __syncthreads();  // the next tile overwrites sk/sv
  }
  MergeKeyGroups<L, G>(m, l, acc);
  if (active && lane < L && dim_ok) {
#pragma unroll
    for (int i = 0; i < G; ++i) {
      if (i >= ng) break;
#pragma unroll
      for (int j = 0; j < 8; ++j) EmitElement(p, blockIdx.z, t0 + warp, h0 + i, d0 + j, acc[i][j], m[i], l[i]);
    }
  }
}

// grid (T, kv_heads * head_groups, splits), kAttnThreads threads. Block x = token t: the per-token
// path when t's seq has few tokens this step (unless p.seqs is kLongOnly), else (unless kShortOnly)
// the tile path when t starts a tile of 8 tokens of its seq (other blocks return at once).
template <typename Kv, int L, int G>
__global__ void __launch_bounds__(kAttnThreads, 2) PagedAttentionKernel(AttnParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  extern __shared__ uint4 attn_smem[];
  const int t = blockIdx.x;
  const int g = blockIdx.y / p.head_groups, hg = blockIdx.y % p.head_groups;
  const int h0 = g * p.group + hg * G;
  const int ng = min(G, p.group - hg * G);
  const int seq = p.batch.token_seq[t];
  const int tb = p.batch.token_begin[seq], n = p.batch.token_begin[seq + 1] - tb;
  if (n <= kPerTokenMaxTokens) {
    if (p.seqs != SplitKSeqs::kLongOnly) {
      AttendOneToken<Kv, L, G>(p, t, seq, g, h0, ng, reinterpret_cast<float*>(attn_smem));
    }
  } else if (p.seqs != SplitKSeqs::kShortOnly && (t - tb) % kAttnWarps == 0) {
    AttendTokenTile<Kv, L, G>(p, t, min(kAttnWarps, tb + n - t), seq, g, h0, ng, attn_smem);
  }
}

// grid (T, heads): out[t, h, :] = merge of the splits' partials, normalised and gated. The splits'
// weights exp2(m_s - max) go to shared memory first, so each dim's sum over splits is a run of
// independent loads (a serial walk over 64 splits' partials would cost 64 L2 round trips).
__global__ void CombineSplitsKernel(AttnParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  __shared__ float weight[kAttnMaxSplits];      // exp2(m_s - max); 0 for a split with no keys
  __shared__ float weighted_l[kAttnMaxSplits];  // l_s * weight[s]
  __shared__ float warp_max[32];
  __shared__ float l_total;
  const int t = blockIdx.x, h = blockIdx.y, hd = p.kv.head_dim;
  if (p.seqs != SplitKSeqs::kAll) {  // block-uniform
    const int seq = p.batch.token_seq[t];
    const bool is_short = p.batch.token_begin[seq + 1] - p.batch.token_begin[seq] <= kPerTokenMaxTokens;
    if (is_short != (p.seqs == SplitKSeqs::kShortOnly)) return;
  }
  const size_t split_stride = static_cast<size_t>(p.batch.num_tokens) * p.heads;
  const size_t row = static_cast<size_t>(t) * p.heads + h;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x) mx = fmaxf(mx, p.ws.m[s * split_stride + row]);
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, off));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < static_cast<int>((blockDim.x + 31) / 32); ++w) mx = fmaxf(mx, warp_max[w]);
  const float base = mx == -INFINITY ? 0.f : mx;
  for (int s = threadIdx.x; s < p.num_splits; s += blockDim.x) {
    const float ms = p.ws.m[s * split_stride + row];
    weight[s] = ms == -INFINITY ? 0.f : exp2f(ms - base);
    weighted_l[s] = ms == -INFINITY ? 0.f : p.ws.l[s * split_stride + row] * weight[s];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float l = 0.f;
    for (int s = 0; s < p.num_splits; ++s) l += weighted_l[s];
    l_total = l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float asum = 0.f;
#pragma unroll 8
    for (int s = 0; s < p.num_splits; ++s) {
      const float a = p.ws.acc[(s * split_stride + row) * hd + d];  // 0 for a split with no keys
      asum += weight[s] != 0.f ? a * weight[s] : 0.f;
    }
    StoreGated(p, t, h, d, asum, l_total);
  }
}

template <typename Kv, int L, int G>
cudaError_t LaunchAttention(const AttnParams& p, int kv_heads, cudaStream_t stream) {
  constexpr int kTileKeys = 1024 / L;
  const int hd = p.kv.head_dim;
  const size_t tile_bytes = 2 * static_cast<size_t>(kTileKeys) * hd * Kv::kBytes;
  const size_t merge_bytes = static_cast<size_t>(kAttnWarps) * G * (hd + 2) * sizeof(float);
  const size_t smem = std::max(tile_bytes, merge_bytes);  // <= 33 KiB for head_dim <= 256
  const dim3 grid(p.batch.num_tokens, kv_heads * p.head_groups, p.num_splits);
  LaunchStepKernel(PagedAttentionKernel<Kv, L, G>, dim3(grid), dim3(kAttnThreads), smem, stream, p);
  return cudaGetLastError();
}

template <typename Kv, int G>
cudaError_t LaunchAttentionForHeadDim(const AttnParams& p, int kv_heads, cudaStream_t stream) {
  const int hd = p.kv.head_dim;
  if (hd <= 16) return LaunchAttention<Kv, 2, G>(p, kv_heads, stream);
  if (hd <= 32) return LaunchAttention<Kv, 4, G>(p, kv_heads, stream);
  if (hd <= 64) return LaunchAttention<Kv, 8, G>(p, kv_heads, stream);
  if (hd <= 128) return LaunchAttention<Kv, 16, G>(p, kv_heads, stream);
  return LaunchAttention<Kv, 32, G>(p, kv_heads, stream);
}

template <typename Kv>
cudaError_t LaunchAttentionForGroup(AttnParams& p, int kv_heads, cudaStream_t stream) {
  if (p.group == 1) {
    p.head_groups = 1;
    return LaunchAttentionForHeadDim<Kv, 1>(p, kv_heads, stream);
  }
  if (p.group == 2) {
    p.head_groups = 1;
    return LaunchAttentionForHeadDim<Kv, 2>(p, kv_heads, stream);
  }
  p.head_groups = (p.group + 3) / 4;
  return LaunchAttentionForHeadDim<Kv, 4>(p, kv_heads, stream);
}

}  // namespace

int AttentionSplits(int num_tokens) {
  const int sms = MultiprocessorCount();
  if (num_tokens >= sms) return 1;
  return std::clamp((sms + num_tokens - 1) / std::max(num_tokens, 1), 1, kAttnMaxSplits);
}

size_t AttentionPartialFloats(int splits, int num_tokens, int heads, int head_dim) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(splits) * num_tokens * heads * (static_cast<size_t>(head_dim) + 2);
}

cudaError_t LaunchPagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                                 const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                                 int gate_head_stride, __half* out, float* workspace, SplitKSeqs seqs,
                                 cudaStream_t stream) {
  const bool fp8 = kv.dtype == KvDtype::kFp8E4M3;
  AttnParams p;
  static_cast<AttentionCall&>(p) = MakeAttentionCall(q, heads, kv, batch, gate, gate_row_stride, gate_head_stride, out);
  p.scale_log2 = scale * kLog2e * (fp8 ? kv.k_scale : 1.0f);
  p.seqs = seqs;
  p.num_splits = AttentionSplits(batch.num_tokens);
  p.ws = CarveSplitPartials(workspace, p.num_splits, batch.num_tokens, heads, kv.head_dim);

  const cudaError_t err = fp8 ? LaunchAttentionForGroup<Fp8Kv>(p, kv.kv_heads, stream)
                              : LaunchAttentionForGroup<Bf16Kv>(p, kv.kv_heads, stream);
  if (err != cudaSuccess || p.num_splits == 1) return err;
  const int threads = std::min(256, (kv.head_dim + 31) / 32 * 32);
  LaunchStepKernel(CombineSplitsKernel, dim3(dim3(batch.num_tokens, heads)), dim3(threads), 0, stream, p);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
