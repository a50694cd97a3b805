// Chunked Gated DeltaNet, kernels 2 and 3 of 3 (gdn.h has the algebra, gdn_chunked_prep.cu kernel
// 1) and the launcher of all three.
//
// Recurrence: a block (256 threads, 8 warps) owns 32 value columns of one (seq, value head) and walks
// the seq's prepared chunks in order with the state slice S [dkp][32] on chip: f32 registers (warp
// w owns rows 16w..16w+15) mirrored in shared memory for the products that read it. Per chunk:
//   b. delta = U - W S (3xTF32) and O = (diag(gamma) Q) S (TF32): warp w computes rows 16 (w % 4)..,
//      columns 16 (w / 4).. of both; delta goes back into the chunk's U slice;
//   d. S = exp(G_last) S + K~^T delta (3xTF32: warp w its own rows, every column) and O += P delta
//      (TF32, only P's nonzero 16x16 blocks); O (f32) to the workspace, S to shared memory.
// The records are double-buffered: chunk c + 1's (W, K~^T, Q, P, decay whole, its 32 columns of U)
// loads by cp.async while chunk c computes. Two barriers a chunk: after the load (which also orders
// the previous chunk's S writes before this chunk's reads and frees the other buffer) and after delta.
// The state is read at the start (zeros for a fresh seq) and written once at the end.
// Precision: delta and the state update run as 3xTF32 (~f32) with the small terms in their own
// accumulators, so the carried state stays within ~1e-6 of f32 per chunk; O's products are plain
// TF32 like the f16 Q / P they read (the f16 output tolerance is 5e-3, see gdn_prefill_test.cc).
//
// Output: a block per (value head, chunk slot): per token, rms of O over dv, times norm_w and silu(z),
// to f16; warp per token, a lane four columns.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/gdn_math.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace gdn_chunked {
namespace {


// A buffer: the record's [0, u_off) as it is, then the U slice [64][kLdSlice] (delta after step b).
__host__ __device__ inline size_t StageBytes(const GdnChunkLayout& lay) {
  return static_cast<size_t>(lay.u_off) + sizeof(float) * kC * kLdSlice;
}
size_t RecurrenceSmemBytes(const GdnChunkLayout& lay) {
  return 2 * StageBytes(lay) + sizeof(float) * static_cast<size_t>(lay.dkp) * kLdSlice;
}

// grid (dvp / 32, nv, num_seqs).
template <bool kExact>
__global__ void __launch_bounds__(kThreads, 1) GdnChunkRecurrenceKernel(const GdnChunkParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int s = static_cast<int>(blockIdx.z), j = static_cast<int>(blockIdx.y);
  const int col0 = static_cast<int>(blockIdx.x) * kW;
  const int32_t* tb = p.batch.token_begin;
  const int tb0 = tb[0], t0 = tb[s], total = tb[s + 1] - t0;
  if (total < p.min_tokens || total <= 0) return;  // the same for the whole block
  const int chunks = (total + kC - 1) / kC;
  const int slot0 = (t0 - tb0) / kC + s;
  if (slot0 + chunks > p.num_slots) return;  // a batch whose num_tokens understates it: outputs stay unwritten

  extern __shared__ __align__(16) uint8_t smem[];
  const GdnChunkLayout& L = p.lay;
  const int stage_bytes = static_cast<int>(StageBytes(L));
  float* Ss = reinterpret_cast<float*>(smem + 2 * stage_bytes);  // [dkp][kLdSlice]

  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5;
  const int g = LaneG(), t = LaneT();
  const int dk = p.dk, dv = p.dv, dkp = L.dkp;
  const int mt = warp & 3, np = warp >> 2;      // step b / O: rows 16 mt.., n-tiles 2 np, 2 np + 1
  const bool has_rows = 16 * warp < dkp;       // step d: state rows 16 warp.. (all 4 n-tiles)
  const int slot = p.batch.slots[s];
  const bool fresh = p.batch.start_pos[s] == 0;
  float* state = p.state + (static_cast<size_t>(slot) * p.nv + j) * static_cast<size_t>(dk) * dv;

  auto issue = [&](int c, int buf) {
    const uint8_t* rec = p.records + (static_cast<size_t>(slot0 + c) * p.nv + j) * static_cast<size_t>(L.bytes);
    uint8_t* st = smem + buf * stage_bytes;
    for (int i = tid; i < L.u_off / 16; i += kThreads) CpAsync16(st + 16 * i, rec + 16 * i, true);
    const float* u = reinterpret_cast<const float*>(rec + L.u_off) + col0;
    float* us = reinterpret_cast<float*>(st + L.u_off);
    for (int i = tid; i < kC * kW / 4; i += kThreads) {
      const int r = i >> 3, q = i & 7;
      CpAsync16(us + r * kLdSlice + 4 * q, u + r * L.dvp + 4 * q, true);
    }
    CpAsyncCommit();
  };
  issue(0, 0);

  // The state slice: element (n, e) of warp w is row 16w + g + 8 (e / 2), column 8n + 2t + e % 2.
  float sreg[4][4];
#pragma unroll
  for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * warp + g + 8 * (e >> 1), c = 8 * nn + 2 * t + (e & 1);
      sreg[nn][e] = (!fresh && has_rows && r < dk && col0 + c < dv) ? state[static_cast<size_t>(r) * dv + col0 + c]
                                                                    : 0.0f;
      if (has_rows) Ss[r * kLdSlice + c] = sreg[nn][e];
    }
  }

  for (int c = 0; c < chunks; ++c) {
    const int buf = c & 1;
    uint8_t* st = smem + buf * stage_bytes;
    const float* Ws = reinterpret_cast<const float*>(st + L.w_off);
    const float* KTs = reinterpret_cast<const float*>(st + L.kt_off);
    const __half* Qs = reinterpret_cast<const __half*>(st + L.q_off);
    const __half* Ps = reinterpret_cast<const __half*>(st + L.p_off);
    float* Us = reinterpret_cast<float*>(st + L.u_off);
    CpAsyncWait<0>();
    __syncthreads();  // chunk c landed; chunk c - 1 is done with the other buffer and wrote S
    if (c + 1 < chunks) issue(c + 1, buf ^ 1);

    // ---- b. delta = U - W S, O = Q~ S
    float db[2][4], ds[2][4], o[2][4];
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        db[nn][e] = Us[(16 * mt + g + 8 * (e >> 1)) * kLdSlice + 8 * (2 * np + nn) + 2 * t + (e & 1)];
        ds[nn][e] = 0.0f;
        o[nn][e] = 0.0f;
      }
    }
    for (int k0 = 0; k0 < dkp; k0 += 8) {
      uint32_t wh[4], wl[4], qa[4];
      LoadA<kExact>(wh, wl, Ws + 16 * mt * L.ldw + k0, L.ldw, -1.0f);
      LoadA16(qa, Qs + 16 * mt * L.ldq + k0, L.ldq);
#pragma unroll
      for (int nn = 0; nn < 2; ++nn) {
        uint32_t sh[2], sl[2];
        LoadBKN<kExact>(sh, sl, Ss + k0 * kLdSlice + 8 * (2 * np + nn), kLdSlice);
        Mma3<kExact>(db[nn], ds[nn], wh, wl, sh, sl);
        Mma1<kExact>(o[nn], qa, sh);
      }
    }
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        Us[(16 * mt + g + 8 * (e >> 1)) * kLdSlice + 8 * (2 * np + nn) + 2 * t + (e & 1)] = db[nn][e] + ds[nn][e];
      }
    }
    __syncthreads();  // delta complete; every read of S for this chunk done

    // ---- d. S = decay S + K~^T delta; O += P delta
    const float decay = *reinterpret_cast<const float*>(st + L.decay_off);
    float sb[4][4], ss[4][4];
#pragma unroll
    for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sb[nn][e] = decay * sreg[nn][e];
        ss[nn][e] = 0.0f;
      }
    }
    const int o_steps = 2 * (mt + 1);  // P's row tile mt is zero past token 16 (mt + 1)
#pragma unroll 2
    for (int ks = 0; ks < kC / 8; ++ks) {
      const int k0 = 8 * ks;
      uint32_t kh[4] = {0u, 0u, 0u, 0u}, kl[4] = {0u, 0u, 0u, 0u}, pa[4] = {0u, 0u, 0u, 0u};
      if (has_rows) LoadA<kExact>(kh, kl, KTs + 16 * warp * kLdKt + k0, kLdKt);
      const bool with_o = ks < o_steps;
      if (with_o) LoadA16(pa, Ps + 16 * mt * kLdP + k0, kLdP);
#pragma unroll
      for (int nn = 0; nn < 4; ++nn) {
        const bool mine = (nn >> 1) == np;
        if (!has_rows && !(with_o && mine)) continue;  // warp-uniform
        uint32_t dh[2], dl[2];
        LoadBKN<kExact>(dh, dl, Us + k0 * kLdSlice + 8 * nn, kLdSlice);
        if (has_rows) Mma3<kExact>(sb[nn], ss[nn], kh, kl, dh, dl);
        if (with_o && mine) Mma1<kExact>(o[nn & 1], pa, dh);
      }
    }
    if (has_rows) {
#pragma unroll
      for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sreg[nn][e] = sb[nn][e] + ss[nn][e];
          Ss[(16 * warp + g + 8 * (e >> 1)) * kLdSlice + 8 * nn + 2 * t + (e & 1)] = sreg[nn][e];
        }
      }
    }
    // O rows of this chunk's tokens, columns < dv (dv % 4 == 0: a pair is in or out together).
    const int n = min(kC, total - c * kC);
    const int row0 = t0 - tb0 + c * kC;
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
      const int col = col0 + 8 * (2 * np + nn) + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * mt + g + 8 * h;
        if (r < n && col < dv && row0 + r < p.num_tokens) {
          *reinterpret_cast<float2*>(p.o + (static_cast<size_t>(row0 + r) * p.nv + j) * dv + col) =
              make_float2(o[nn][2 * h], o[nn][2 * h + 1]);
        }
      }
    }
  }

  if (has_rows) {
#pragma unroll
    for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * warp + g + 8 * h, c = col0 + 8 * nn + 2 * t;
        if (r < dk && c < dv) {
          *reinterpret_cast<float2*>(state + static_cast<size_t>(r) * dv + c) =
              make_float2(sreg[nn][2 * h], sreg[nn][2 * h + 1]);
        }
      }
    }
  }
}

// grid (nv, num_slots): out = norm_w * O / rms(O) * silu(z) over the chunk's tokens.
__global__ void __launch_bounds__(kThreads) GdnChunkOutputKernel(const GdnChunkParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int j = static_cast<int>(blockIdx.x);
  const ChunkRef ref = LocateChunk(p, static_cast<int>(blockIdx.y));
  if (!ref.valid) return;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int dv = p.dv, c = 4 * lane;  // dv <= 128: one float4 a lane
  const bool mine = c < dv;
  float4 w = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (mine) w = make_float4(__ldg(p.norm_w + c), __ldg(p.norm_w + c + 1), __ldg(p.norm_w + c + 2), __ldg(p.norm_w + c + 3));
  for (int r = warp; r < ref.n; r += kWarps) {
    const int rel = ref.tok_rel + r, tok = ref.tok_abs + r;
    if (rel >= p.num_tokens) break;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (mine) o = *reinterpret_cast<const float4*>(p.o + (static_cast<size_t>(rel) * p.nv + j) * dv + c);
    float sq = o.x * o.x + o.y * o.y + o.z * o.z + o.w * o.w;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
    const float rms = rsqrtf(sq / static_cast<float>(dv) + p.eps);
    if (!mine) continue;
    const float* z = p.z + static_cast<size_t>(tok) * p.z_stride + j * dv + c;
    const float y0 = (w.x * (o.x * rms)) * SiluF(__ldg(z));
    const float y1 = (w.y * (o.y * rms)) * SiluF(__ldg(z + 1));
    const float y2 = (w.z * (o.z * rms)) * SiluF(__ldg(z + 2));
    const float y3 = (w.w * (o.w * rms)) * SiluF(__ldg(z + 3));
    __half2* out = reinterpret_cast<__half2*>(p.out + (static_cast<size_t>(tok) * p.nv + j) * dv + c);
    out[0] = __halves2half2(ToHalfSaturated(y0), ToHalfSaturated(y1));
    out[1] = __halves2half2(ToHalfSaturated(y2), ToHalfSaturated(y3));
  }
}

template <bool kExact>
cudaError_t LaunchRecurrence(const GdnChunkParams& p, cudaStream_t stream) {
  const size_t smem = RecurrenceSmemBytes(p.lay);
  const cudaError_t attr = cudaFuncSetAttribute(GdnChunkRecurrenceKernel<kExact>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  return LaunchStepKernel(GdnChunkRecurrenceKernel<kExact>, dim3(p.lay.dvp / kW, p.nv, p.batch.num_seqs),
                          dim3(kThreads), smem, stream, p);
}

}  // namespace
}  // namespace gdn_chunked

size_t GdnChunkedSmemBytes(int dk, int dv) {
  const GdnChunkLayout lay = MakeGdnChunkLayout(dk, dv);
  return std::max(gdn_chunked::GdnChunkPrepSmemBytes(lay), gdn_chunked::RecurrenceSmemBytes(lay));
}

bool GdnChunkedFitsDevice(int dk, int dv) {
  return GdnChunkedSmemBytes(dk, dv) <= static_cast<size_t>(DeviceSharedMemory().per_block);
}

cudaError_t LaunchGatedDeltaNetChunked(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                       const float* dt_bias, const float* norm_w, float eps,
                                       const RaggedBatchDevice& batch, int min_tokens, bool exact, float* state,
                                       __half* out, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  namespace gc = gdn_chunked;
  if (shape.dk < 1 || shape.dk > kGdnChunkedMaxDk || shape.dv < 4 || shape.dv > kGdnMaxDv || shape.dv % 4 != 0 ||
      batch.num_seqs < 1 || workspace == nullptr ||
      workspace_bytes < GdnChunkWorkspaceBytes(shape, batch.num_tokens, batch.num_seqs) ||
      reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  gc::GdnChunkParams p;
  static_cast<GdnLayerParams&>(p) = MakeGdnLayerParams(in, shape, a_log, dt_bias, norm_w, eps, batch, state, out);
  p.lay = MakeGdnChunkLayout(shape.dk, shape.dv);
  p.min_tokens = std::max(min_tokens, 1);
  p.num_slots = GdnChunkSlots(batch.num_tokens, batch.num_seqs);
  p.num_tokens = batch.num_tokens;
  p.vec_loads = reinterpret_cast<uintptr_t>(in.mixed) % 16 == 0 && in.mixed_stride % 4 == 0 && shape.dk % 4 == 0;
  p.records = static_cast<uint8_t*>(workspace);
  p.o = reinterpret_cast<float*>(p.records + GdnChunkRecordsBytes(shape, batch.num_tokens, batch.num_seqs));
  cudaError_t err = gc::LaunchGdnChunkPrep(p, exact, stream);
  if (err != cudaSuccess) return err;
  err = exact ? gc::LaunchRecurrence<true>(p, stream) : gc::LaunchRecurrence<false>(p, stream);
  if (err != cudaSuccess) return err;
  return LaunchStepKernel(gc::GdnChunkOutputKernel, dim3(shape.nv, p.num_slots), dim3(gc::kThreads), 0, stream, p);
}

}  // namespace sparkserve::kernels::cuda
