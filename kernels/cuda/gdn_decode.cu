// GatedDeltaNetDecode: the Gated DeltaNet recurrence for steps whose seqs have exactly one token
// (decode), as one read and one write of each (seq, value head)'s f32 state [dk, dv].
//
// One token makes the recurrence a single pass over the state. With g = exp(gate), k, q the
// normalised key / scaled query:  S' = g S + k delta^T,  delta = beta (v - g S^T k),
//   o = S'^T q = g S^T q + (k.q) delta
// so S^T k_raw and S^T q_raw (and |k_raw|^2, |q_raw|^2, q_raw.k_raw for the L2 norms) come from one
// block-wide reduction over the rows of S held in registers; S' is computed in registers and stored.
//
// Layout: 256 threads; thread (rg, cg) = (tid / CG, tid % CG) holds float4 column group cg (columns
// 4cg..4cg+3 of the block's slice) of rows rg*M .. rg*M+M-1, loaded (streaming, all before any math)
// and stored once. A warp instruction covers 32/CG rows x 16*CG contiguous bytes (full lines).
//  - whole head (CG 32, 8 warps x 16 rows at dk 128): a block owns a (seq, head), 64 floats of state a
//    thread, 2 blocks an SM (128 KB of state loads in flight an SM); the gated RMSNorm over dv is one
//    warp shuffle (every warp holds all columns). Used when num_seqs * nv fills the SMs.
//  - split columns (CG 8: 32 columns a block, 32 row groups x 4 rows at dk 128): the ceil(dv/32)
//    blocks of a head form one thread-block cluster and exchange their sums of o^2 by pushing them
//    into every peer's shared memory (DSMEM) between two cluster barriers. Small batches: at batch 1
//    the 4B runs 128 blocks of 16 KB.
// Per block: weights, then WaitForPriorGrids, the seq's metadata, the loads, 2 __syncthreads (q/k
// staged in shared memory; the per-warp partial sums), and for clusters 2 cluster barriers (the
// first, "every block of the cluster runs", is arrived early and waited late).
#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/gdn_kernels.h"
#include "kernels/cuda/gdn_math.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kDecodeThreads = 256;
constexpr int kDecodeWarps = kDecodeThreads / 32;
constexpr int kWholeHeadGroups = 32;                      // float4 column groups a block: whole head (128 columns)
constexpr int kSplitGroups = kGdnDecodeSplitColumns / 4;  // split columns (32 columns)
static_assert(kGdnMaxDv <= 4 * kWholeHeadGroups, "a whole-head block covers dv");
static_assert((kGdnMaxDv + kGdnDecodeSplitColumns - 1) / kGdnDecodeSplitColumns <= kGdnDecodeMaxSlices);

__device__ __forceinline__ float& Lane(float4& v, int x) { return x == 0 ? v.x : x == 1 ? v.y : x == 2 ? v.z : v.w; }
__device__ __forceinline__ float Lane(const float4& v, int x) {
  return x == 0 ? v.x : x == 1 ? v.y : x == 2 ? v.z : v.w;
}
__device__ __forceinline__ void Add(float4& a, const float4& b) { a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w; }

// Blocks an SM the register budget is set for (no spills on sm_90a): 2 when a thread holds 64 state
// floats (whole head at dk 128: 128 registers), more for the smaller instantiations. A whole head of
// bf16 state (held packed, half the registers) one more, for more loads in flight: at dk 128 that
// caps it at 80 registers and spills 56 bytes, and still runs the 4B's 64-seq layer in 46 us against
// 60 us at two blocks an SM (H200, bench/RESULTS.md).
constexpr int DecodeMinBlocks(int CG, int M, bool bf16) {
  return (M >= 8 ? 2 : (CG == 32 ? 3 : 4)) + (bf16 && CG == 32 ? 1 : 0);
}

// A thread's state row of 4 columns as held in registers: f32, or (bf16 state) the 4 stored bf16
// values packed in a uint2, widened where the math reads them, so that a thread holds twice the rows.
template <bool kBf16State>
struct StateRow;
template <>
struct StateRow<false> {
  using Type = float4;
  static __device__ __forceinline__ float4 Widen(const float4& r) { return r; }
  static __device__ __forceinline__ float4 Load(const void* state, size_t i) { return LoadGdnState4(state, i, false); }
  static __device__ __forceinline__ float4 Zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
};
template <>
struct StateRow<true> {
  using Type = uint2;
  static __device__ __forceinline__ float4 Widen(const uint2& r) { return Bf16QuadToFloat4(r); }
  static __device__ __forceinline__ uint2 Load(const void* state, size_t i) {
    return __ldcs(reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(state) + i));
  }
  static __device__ __forceinline__ uint2 Zero() { return make_uint2(0u, 0u); }
};

// grid (slices, nv, num_seqs); cluster (slices, 1, 1) when slices > 1. CG float4 column groups a
// block, M rows a thread (dk <= (256 / CG) * M). kBf16State: the state is stored as bf16
// (p.state_bf16) and held packed (StateRow).
template <int CG, int M, bool kBf16State>
__global__ void __launch_bounds__(kDecodeThreads, DecodeMinBlocks(CG, M, kBf16State))
    GatedDeltaNetDecodeKernel(const GdnLayerParams p) {
  constexpr int kRowGroups = kDecodeThreads / CG;
  constexpr int kRows = kRowGroups * M;  // rows this instantiation covers (>= dk)
  static_assert(CG <= 32 && 32 % CG == 0 && M % 4 == 0);
  static_assert(kRows <= kDecodeThreads && 4 * CG <= kDecodeThreads, "one staged element a thread");
  using Row = StateRow<kBf16State>;
  __shared__ __align__(16) float qk[2][kRows];               // q_raw, k_raw of the key head; zeros past dk
  __shared__ __align__(16) float cols[3][4 * CG];            // v, z, norm_w of the block's columns; zeros past dv
  __shared__ float gates[2];                                 // decay = exp(g), beta
  __shared__ __align__(16) float4 red[kDecodeWarps][2][CG];  // per warp: S^T k_raw, S^T q_raw a column group
  __shared__ __align__(16) float4 red_norms[kDecodeWarps];   // per warp: |k_raw|^2, |q_raw|^2, q_raw.k_raw
  __shared__ float cluster_sums[kGdnDecodeMaxSlices];        // sum of o^2 of each slice (cluster rank)

  const int slice = static_cast<int>(blockIdx.x);  // == cluster rank: the cluster spans grid.x
  const int slices = static_cast<int>(gridDim.x);
  const int j = static_cast<int>(blockIdx.y);
  const int s = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int cgi = tid % CG, rg = tid / CG;
  const int row0 = rg * M;
  const int col0 = slice * 4 * CG;  // the block's first value column
  const int col = col0 + 4 * cgi;   // first of this thread's 4 value columns
  const bool col_ok = col < p.dv;   // dv % 4 == 0: all 4 or none
  const int kh = j / (p.nv / p.nk);

  // Weights (no step kernel writes them) before waiting for the previous kernel.
  float a_scale = 0.0f, dt_bias = 0.0f;
  if (tid == 0) {
    a_scale = expf(__ldg(p.a_log + j));
    dt_bias = __ldg(p.dt_bias + j);
  }
  if (tid < 4 * CG) cols[2][tid] = col0 + tid < p.dv ? __ldg(p.norm_w + col0 + tid) : 0.0f;

  WaitForPriorGrids();
  AllowNextGrid();
  const int t = p.batch.token_begin[s];
  const int n = p.batch.token_begin[s + 1] - t;
  const int slot = p.batch.slots[s];
  const bool fresh = p.batch.start_pos[s] == 0;
  const bool decode_seq = n == 1;  // else left untouched: returns below, after the loads it predicates
                                   // (so that slot is read together with token_begin, one latency)
  // Every load of the block before any math: the state slice (registers), then q/k, v, z and the
  // gates (staged in shared memory, so they hold no registers across the block).
  const size_t head_state = static_cast<size_t>(p.dk) * p.dv;
  // Element (row0, col) of this thread's columns; row row0 + m is m * dv elements further (32-bit offsets).
  const size_t state0 = (static_cast<size_t>(slot) * p.nv + j) * head_state + static_cast<size_t>(row0) * p.dv + col;
  // This thread's first element, then rows at 32-bit element offsets m * dv (one base register).
  void* const my_state = static_cast<uint8_t*>(p.state) + state0 * (kBf16State ? 2 : 4);
  const int rows = min(M, p.dk - row0);  // this thread's rows below dk (may be <= 0)
  typename Row::Type S[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const bool load = decode_seq && !fresh && col_ok && m < rows;
    S[m] = load ? Row::Load(my_state, static_cast<uint32_t>(m * p.dv)) : Row::Zero();
  }
  if (!decode_seq) return;                             // the same for the whole cluster, before any cluster barrier
  if (slices > 1) __cluster_barrier_arrive_relaxed();  // "this block runs"; waited before the DSMEM push
  const float* row = p.mixed + static_cast<size_t>(t) * p.mixed_stride;
  if (tid < kRows) {
    const bool ok = tid < p.dk;
    qk[0][tid] = ok ? __ldg(row + kh * p.dk + tid) : 0.0f;
    qk[1][tid] = ok ? __ldg(row + (p.nk + kh) * p.dk + tid) : 0.0f;
  }
  if (tid < 4 * CG) {  // zero v past dv: delta = o = 0 there
    const bool ok = col0 + tid < p.dv;
    cols[0][tid] = ok ? __ldg(row + 2 * p.nk * p.dk + j * p.dv + col0 + tid) : 0.0f;
    cols[1][tid] = ok ? __ldg(p.z + static_cast<size_t>(t) * p.z_stride + j * p.dv + col0 + tid) : 0.0f;
  }
  if (tid == 0) {  // both loads before the math (one latency, not two)
    const float a_in = __ldg(p.a + static_cast<size_t>(t) * p.ab_stride + j);
    const float b_in = __ldg(p.b + static_cast<size_t>(t) * p.ab_stride + j);
    const float ax = a_in + dt_bias;
    gates[0] = expf(GdnLogDecay(ax, a_scale));
    gates[1] = GdnBeta(b_in);
  }
  __syncthreads();  // qk, cols, gates staged

  // Partial sums over this thread's rows: r[0..3] S^T k_raw, r[4..7] S^T q_raw (its 4 columns),
  // r[8] |k_raw|^2, r[9] |q_raw|^2, r[10] q_raw.k_raw (rows >= dk are zeros in qk and S).
  float r[11];
#pragma unroll
  for (int x = 0; x < 11; ++x) r[x] = 0.0f;
#pragma unroll
  for (int u = 0; u < M; u += 4) {
    const float4 q4 = *reinterpret_cast<const float4*>(&qk[0][row0 + u]);
    const float4 k4 = *reinterpret_cast<const float4*>(&qk[1][row0 + u]);
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const float qv = Lane(q4, y), kv = Lane(k4, y);
      const float4 Sm = Row::Widen(S[u + y]);
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        r[x] = fmaf(Lane(Sm, x), kv, r[x]);
        r[4 + x] = fmaf(Lane(Sm, x), qv, r[4 + x]);
      }
      r[8] = fmaf(kv, kv, r[8]);
      r[9] = fmaf(qv, qv, r[9]);
      r[10] = fmaf(qv, kv, r[10]);
    }
  }
  // Over the row groups of this warp (lanes that differ above the CG column-group bits).
#pragma unroll
  for (int off = CG; off < 32; off *= 2) {
#pragma unroll
    for (int x = 0; x < 11; ++x) r[x] += __shfl_xor_sync(0xffffffffu, r[x], off);
  }
  if (lane < CG) {  // lane == cgi here
    red[warp][0][lane] = make_float4(r[0], r[1], r[2], r[3]);
    red[warp][1][lane] = make_float4(r[4], r[5], r[6], r[7]);
  }
  if (lane == 0) red_norms[warp] = make_float4(r[8], r[9], r[10], 0.0f);
  __syncthreads();  // red written; no shared memory is written again but cluster_sums
  float4 sk = make_float4(0.f, 0.f, 0.f, 0.f), sq = sk, norms = sk;
#pragma unroll
  for (int w = 0; w < kDecodeWarps; ++w) {
    Add(sk, red[w][0][cgi]);
    Add(sq, red[w][1][cgi]);
    Add(norms, red_norms[w]);
  }

  const float inv_k = rsqrtf(norms.x + 1e-6f);
  const float inv_q = rsqrtf(norms.y + 1e-6f) * p.q_scale;
  const float kq = norms.z * inv_k * inv_q;  // normalised k.q
  const float decay = gates[0], beta = gates[1];
  const float4 v = *reinterpret_cast<const float4*>(&cols[0][4 * cgi]);
  float4 delta = make_float4(0.f, 0.f, 0.f, 0.f), o = delta;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const float kv = decay * inv_k * Lane(sk, x);
    Lane(delta, x) = beta * (Lane(v, x) - kv);
    Lane(o, x) = fmaf(kq, Lane(delta, x), decay * inv_q * Lane(sq, x));
  }
  // This slice's sum of o^2 over its CG column groups (lanes that differ in the low CG bits; every
  // row group holds the same o). Invalid columns have o = 0.
  float ss = o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w;
#pragma unroll
  for (int off = 1; off < CG; off *= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if (slices > 1) {
    // Every block of the cluster runs (barrier 1); thread r pushes this slice's sum into block r's
    // cluster_sums[slice]; barrier 2 (release / acquire) publishes them. No block touches a peer's
    // shared memory after its barrier-2 arrival, so none has to wait for the others before exiting.
    __cluster_barrier_wait();
    if (tid < slices) *cg::this_cluster().map_shared_rank(&cluster_sums[slice], tid) = ss;
    __cluster_barrier_arrive();
  }

  // S' = decay S + k delta^T, stored once (the cluster barrier completes meanwhile).
  if (col_ok) {
#pragma unroll
    for (int u = 0; u < M; u += 4) {
      const float4 k4 = *reinterpret_cast<const float4*>(&qk[1][row0 + u]);
#pragma unroll
      for (int y = 0; y < 4; ++y) {
        const float kn = Lane(k4, y) * inv_k;
        float4 Sm = Row::Widen(S[u + y]);
#pragma unroll
        for (int x = 0; x < 4; ++x) Lane(Sm, x) = fmaf(kn, Lane(delta, x), decay * Lane(Sm, x));
        if (u + y < rows) StoreGdnState4(my_state, static_cast<uint32_t>((u + y) * p.dv), Sm, kBf16State);
      }
    }
  }

  float total = ss;
  if (slices > 1) {
    __cluster_barrier_wait();
    total = 0.0f;
    for (int r2 = 0; r2 < slices; ++r2) total += cluster_sums[r2];
  }
  if (rg == 0 && col_ok) {
    const float inv_rms = rsqrtf(total / static_cast<float>(p.dv) + p.eps);
    const float4 z = *reinterpret_cast<const float4*>(&cols[1][4 * cgi]);
    const float4 norm_w = *reinterpret_cast<const float4*>(&cols[2][4 * cgi]);
    float y[4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
      y[x] = SaturateToHalfRange((Lane(norm_w, x) * (Lane(o, x) * inv_rms)) * SiluF(Lane(z, x)));
    const __half2 lo = __floats2half2_rn(y[0], y[1]), hi = __floats2half2_rn(y[2], y[3]);
    __half* dst = p.out + (static_cast<size_t>(t) * p.nv + j) * p.dv + col;  // 8-byte aligned (checked)
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

template <int CG, int M, bool kBf16State>
cudaError_t LaunchDecode(const GdnLayerParams& p, cudaStream_t stream) {
  const int slices = (p.dv + 4 * CG - 1) / (4 * CG);
  return LaunchStepKernelInClusters(GatedDeltaNetDecodeKernel<CG, M, kBf16State>,
                                    dim3(slices, p.nv, p.batch.num_seqs), dim3(kDecodeThreads), 0, stream,
                                    slices > 1 ? static_cast<unsigned>(slices) : 0u, p);
}

// The decode kernel for the state dtype (a bf16 state is held packed: more blocks an SM, so more
// state loads in flight).
template <bool kBf16State>
cudaError_t LaunchDecodeFor(const GdnShape& shape, bool whole, const GdnLayerParams& p, cudaStream_t stream) {
  if (whole) {  // 8 row groups
    if (shape.dk <= 32) return LaunchDecode<kWholeHeadGroups, 4, kBf16State>(p, stream);
    if (shape.dk <= 64) return LaunchDecode<kWholeHeadGroups, 8, kBf16State>(p, stream);
    if (shape.dk <= kGdnDecodeWholeHeadMaxDk) return LaunchDecode<kWholeHeadGroups, 16, kBf16State>(p, stream);
    return cudaErrorInvalidValue;
  }
  // 32 row groups
  if (shape.dk <= 128) return LaunchDecode<kSplitGroups, 4, kBf16State>(p, stream);
  return LaunchDecode<kSplitGroups, 8, kBf16State>(p, stream);
}

}  // namespace

bool GdnDecodeUsesWholeHeads(const GdnShape& shape, int num_seqs) {
  return shape.dk <= kGdnDecodeWholeHeadMaxDk &&
         static_cast<int64_t>(num_seqs) * shape.nv >= static_cast<int64_t>(MultiprocessorCount());
}

cudaError_t LaunchGatedDeltaNetDecode(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                      const float* dt_bias, const float* norm_w, float eps,
                                      const RaggedBatchDevice& batch, GdnDecodeLayout layout, GdnStateRef state,
                                      __half* out, cudaStream_t stream) {
  const GdnLayerParams p = MakeGdnLayerParams(in, shape, a_log, dt_bias, norm_w, eps, batch, state, out);
  const bool whole = layout == GdnDecodeLayout::kWholeHead ||
                     (layout == GdnDecodeLayout::kAuto && GdnDecodeUsesWholeHeads(shape, batch.num_seqs));
  if (shape.dv > kGdnMaxDv || shape.dk > kGdnMaxDk) return cudaErrorInvalidValue;
  return p.state_bf16 ? LaunchDecodeFor<true>(shape, whole, p, stream)
                      : LaunchDecodeFor<false>(shape, whole, p, stream);
}

}  // namespace sparkserve::kernels::cuda
