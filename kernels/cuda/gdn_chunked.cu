// Chunked Gated DeltaNet, kernels 2 and 3 of 3 (gdn.h has the algebra, gdn_chunked_prep.cu kernel
// 1) and the launcher of all three.
//
// Recurrence: a block (256 threads, 8 warps) owns 32 value columns of one (seq, value head) and walks
// the seq's prepared chunks in order with the state slice S [dkp][32] on chip: f32 registers (warp
// w owns rows 16w..16w+15) mirrored in shared memory for the products that read it. Per chunk:
//   b. delta = U - W S (3xTF32) and O = (diag(gamma) Q) S (TF32): warp w computes rows 16 (w % 4)..,
//      columns 16 (w / 4).. of both, summed over k = 0..dkp; delta to shared memory;
//   d. S = exp(G_last) S + K~^T delta (3xTF32: warp w its own rows, every column) and O += P delta
//      (TF32, only P's nonzero 16x16 blocks), summed over the chunk's tokens; O (f32) to the
//      workspace, S to shared memory.
// The record streams through shared memory in pieces, a ring of kRing buffers with kRing - 1 pieces
// in flight (cp.async): b-pieces (columns [k0, k0 + kb) of W and Q: b's sums over that k range), then
// d-pieces (tokens [t0, t0 + kPieceT) of KT and P: d's sums over those tokens). The staging
// (gdn_kernels.h GdnChunkedVariant) only sets the piece sizes: kLarge takes W + Q and KT + P whole
// (2 pieces a chunk, 180 KB at dk = 128), kSmall 32 columns and 16 tokens at a time (8 pieces a chunk,
// 86 KB: sm_120 / sm_121). Both add the same products in the same order into the same registers:
// bit-identical results. One barrier a piece: after its wait, which makes it visible, frees the
// buffer the previous piece used (refilled at once), and orders the delta / S writes of the
// previous phase before this one's reads. U's values each thread starts delta from, and exp(G_last),
// come straight from the record into registers a chunk ahead. The state is read at the start (zeros
// for a fresh seq) and written once at the end.
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

// `rows` rows of row_bytes (a multiple of 16) from src to dst, 16 bytes a cp.async, the block's
// threads together.
__device__ __forceinline__ void CopyRows(uint8_t* dst, int dst_stride, const uint8_t* src, int src_stride, int rows,
                                         int row_bytes) {
  const int per_row = row_bytes >> 4;
  for (int i = static_cast<int>(threadIdx.x); i < rows * per_row; i += kThreads) {
    const int r = i / per_row, q = i - r * per_row;
    CpAsync16(dst + r * dst_stride + 16 * q, src + static_cast<size_t>(r) * src_stride + 16 * q);
  }
}

// grid (dvp / 32, nv, num_seqs). kPieceK: W / Q columns a b-piece (0: all dkp); kPieceT: KT / P
// tokens a d-piece; kRing: piece buffers (gdn_kernels.h GdnChunkStaging).
template <int kPieceK, int kPieceT, int kRing, bool kExact>
__global__ void __launch_bounds__(kThreads, 1) GdnChunkRecurrenceKernel(const GdnChunkParams p) {
  static_assert(kPieceK % 16 == 0 && kPieceT % 8 == 0 && kC % kPieceT == 0 && kRing >= 2,
                "b-pieces hold whole 8-column k-steps of every dkp (a multiple of 16), d-pieces whole 8-token ones");
  constexpr int kAhead = kRing - 1;  // pieces in flight
  constexpr int kLdKtPiece = kPieceT + 4, kLdPPiece = kPieceT + 8;  // = 4 mod 8 floats / 8 mod 16 halves
  constexpr int kDPieces = kC / kPieceT;
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
  const int dk = p.dk, dv = p.dv, dkp = L.dkp;
  const int kb = kPieceK == 0 ? dkp : kPieceK;  // W / Q columns a b-piece
  const int ldw = kb + 4, ldq = kb + 8;         // their row strides in the piece (= 4 mod 8 / 8 mod 16)
  const int b_pieces = (dkp + kb - 1) / kb, pieces = b_pieces + kDPieces;  // a chunk's
  const int piece_bytes = static_cast<int>(GdnPieceBytes(L, GdnChunkStaging{kPieceK, kPieceT, kRing}));
  float* Ss = reinterpret_cast<float*>(smem + kRing * piece_bytes);  // [dkp][kLdSlice]
  float* Ds = Ss + dkp * kLdSlice;                                    // [64][kLdSlice]: delta

  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5;
  const int g = LaneG(), t = LaneT();
  const int mt = warp & 3, np = warp >> 2;      // step b / O: rows 16 mt.., n-tiles 2 np, 2 np + 1
  const bool has_rows = 16 * warp < dkp;       // step d: state rows 16 warp.. (all 4 n-tiles)
  const int slot = p.batch.slots[s];
  const bool fresh = p.batch.start_pos[s] == 0;
  const size_t state0 = (static_cast<size_t>(slot) * p.nv + j) * static_cast<size_t>(dk) * dv;  // element (0, 0)
  const uint8_t* rec0 = p.records + (static_cast<size_t>(slot0) * p.nv + j) * static_cast<size_t>(L.bytes);
  const size_t rec_stride = static_cast<size_t>(p.nv) * static_cast<size_t>(L.bytes);  // chunk to chunk

  // Piece i of the seq (chunk i / pieces) into buffer i % kRing; one commit group whatever i.
  auto issue = [&](int i) {
    const int c = i / pieces, q = i - c * pieces;
    if (c < chunks) {
      const uint8_t* rec = rec0 + static_cast<size_t>(c) * rec_stride;
      uint8_t* dst = smem + (i % kRing) * piece_bytes;
      if (q < b_pieces) {
        const int k0 = q * kb, kw = min(kb, dkp - k0);
        CopyRows(dst, 4 * ldw, rec + L.w_off + 4 * k0, 4 * L.ldw, kC, 4 * kw);
        CopyRows(dst + 4 * kC * ldw, 2 * ldq, rec + L.q_off + 2 * k0, 2 * L.ldq, kC, 2 * kw);
      } else {
        const int tk0 = (q - b_pieces) * kPieceT;
        CopyRows(dst, 4 * kLdKtPiece, rec + L.kt_off + 4 * tk0, 4 * kLdKt, dkp, 4 * kPieceT);
        CopyRows(dst + 4 * dkp * kLdKtPiece, 2 * kLdPPiece, rec + L.p_off + 2 * tk0, 2 * kLdP, kC, 2 * kPieceT);
      }
    }
    CpAsyncCommit();
  };
  // Waits for piece i, refills the buffer piece i - 1 used with piece i + kAhead; piece i's buffer.
  auto next_piece = [&](int i) -> const uint8_t* {
    CpAsyncWait<kAhead - 1>();
    __syncthreads();
    issue(i + kAhead);
    return smem + (i % kRing) * piece_bytes;
  };
  for (int i = 0; i < kAhead; ++i) issue(i);

  // Chunk c's U at this thread's step-b elements (rows 16 mt + g + 8 h, columns 8 (2 np + nn) + 2t, +1)
  // and exp(G_last), into registers (untouched past the last chunk).
  auto load_u = [&](int c, float2 (&u)[2][2], float& decay) {
    if (c >= chunks) return;
    const uint8_t* rec = rec0 + static_cast<size_t>(c) * rec_stride;
    const float* ug = reinterpret_cast<const float*>(rec + L.u_off) + col0 + 2 * t;
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        u[nn][h] = __ldg(reinterpret_cast<const float2*>(ug + (16 * mt + g + 8 * h) * L.dvp + 8 * (2 * np + nn)));
      }
    }
    decay = __ldg(reinterpret_cast<const float*>(rec + L.decay_off));
  };
  float2 u_cur[2][2], u_next[2][2] = {};
  float decay_cur = 0.0f, decay_next = 0.0f;
  load_u(0, u_cur, decay_cur);

  // The state slice: element (n, e) of warp w is row 16w + g + 8 (e / 2), column 8n + 2t + e % 2.
  float sreg[4][4];
#pragma unroll
  for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * warp + g + 8 * (e >> 1), c = 8 * nn + 2 * t + (e & 1);
      sreg[nn][e] = (!fresh && has_rows && r < dk && col0 + c < dv)
                        ? LoadGdnState(p.state, state0 + static_cast<size_t>(r) * dv + col0 + c, p.state_bf16)
                        : 0.0f;
      if (has_rows) Ss[r * kLdSlice + c] = sreg[nn][e];
    }
  }

  for (int c = 0; c < chunks; ++c) {
    load_u(c + 1, u_next, decay_next);  // lands while this chunk computes

    // ---- b. delta = U - W S, O = Q~ S, over the b-pieces' k ranges
    float db[2][4], ds[2][4], o[2][4];
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        db[nn][e] = (e & 1) ? u_cur[nn][e >> 1].y : u_cur[nn][e >> 1].x;
        ds[nn][e] = 0.0f;
        o[nn][e] = 0.0f;
      }
    }
    for (int q = 0; q < b_pieces; ++q) {
      const uint8_t* buf = next_piece(c * pieces + q);
      const float* Ws = reinterpret_cast<const float*>(buf);                   // [64][ldw]: columns k_begin..
      const __half* Qs = reinterpret_cast<const __half*>(buf + 4 * kC * ldw);  // [64][ldq]
      const int k_begin = q * kb, k_end = min(dkp, k_begin + kb);
      for (int k0 = k_begin; k0 < k_end; k0 += 8) {
        uint32_t wh[4], wl[4], qa[4];
        LoadA<kExact>(wh, wl, Ws + 16 * mt * ldw + (k0 - k_begin), ldw, -1.0f);
        LoadA16(qa, Qs + 16 * mt * ldq + (k0 - k_begin), ldq);
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          uint32_t sh[2], sl[2];
          LoadBKN<kExact>(sh, sl, Ss + k0 * kLdSlice + 8 * (2 * np + nn), kLdSlice);
          Mma3<kExact>(db[nn], ds[nn], wh, wl, sh, sl);
          Mma1<kExact>(o[nn], qa, sh);
        }
      }
    }
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        Ds[(16 * mt + g + 8 * (e >> 1)) * kLdSlice + 8 * (2 * np + nn) + 2 * t + (e & 1)] = db[nn][e] + ds[nn][e];
      }
    }
    // (the next piece's barrier: delta complete, every read of S for this chunk done)

    // ---- d. S = decay S + K~^T delta; O += P delta, over the d-pieces' tokens
    float sb[4][4], ss[4][4];
#pragma unroll
    for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sb[nn][e] = decay_cur * sreg[nn][e];
        ss[nn][e] = 0.0f;
      }
    }
    const int o_steps = 2 * (mt + 1);  // P's row tile mt is zero past token 16 (mt + 1)
    for (int q = 0; q < kDPieces; ++q) {
      const uint8_t* buf = next_piece(c * pieces + b_pieces + q);
      const float* KTs = reinterpret_cast<const float*>(buf);                          // [dkp][kLdKtPiece]
      const __half* Ps = reinterpret_cast<const __half*>(buf + 4 * dkp * kLdKtPiece);  // [64][kLdPPiece]
#pragma unroll 2
      for (int ks = 0; ks < kPieceT / 8; ++ks) {
        const int k0 = q * kPieceT + 8 * ks;  // the chunk's token
        uint32_t kh[4] = {0u, 0u, 0u, 0u}, kl[4] = {0u, 0u, 0u, 0u}, pa[4] = {0u, 0u, 0u, 0u};
        if (has_rows) LoadA<kExact>(kh, kl, KTs + 16 * warp * kLdKtPiece + 8 * ks, kLdKtPiece);
        const bool with_o = k0 / 8 < o_steps;
        if (with_o) LoadA16(pa, Ps + 16 * mt * kLdPPiece + 8 * ks, kLdPPiece);
#pragma unroll
        for (int nn = 0; nn < 4; ++nn) {
          const bool mine = (nn >> 1) == np;
          if (!has_rows && !(with_o && mine)) continue;  // warp-uniform
          uint32_t dh[2], dl[2];
          LoadBKN<kExact>(dh, dl, Ds + k0 * kLdSlice + 8 * nn, kLdSlice);
          if (has_rows) Mma3<kExact>(sb[nn], ss[nn], kh, kl, dh, dl);
          if (with_o && mine) Mma1<kExact>(o[nn & 1], pa, dh);
        }
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
    // (S read again only after the next chunk's first barrier)
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
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
      for (int h = 0; h < 2; ++h) u_cur[nn][h] = u_next[nn][h];
    }
    decay_cur = decay_next;
  }

  if (has_rows) {
#pragma unroll
    for (int nn = 0; nn < 4; ++nn) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * warp + g + 8 * h, c = col0 + 8 * nn + 2 * t;
        if (r < dk && c < dv) {
          StoreGdnState2(p.state, state0 + static_cast<size_t>(r) * dv + c,
                         make_float2(sreg[nn][2 * h], sreg[nn][2 * h + 1]), p.state_bf16);
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

template <GdnChunkedVariant kVariant, bool kExact>
cudaError_t LaunchRecurrence(const GdnChunkParams& p, cudaStream_t stream) {
  constexpr GdnChunkStaging kSt = GdnStagingOf(kVariant);
  auto* kernel = GdnChunkRecurrenceKernel<kSt.piece_k, kSt.piece_t, kSt.ring, kExact>;
  const size_t smem = GdnRecurrenceSmemBytes(p.lay, kSt);
  const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  return LaunchStepKernel(kernel, dim3(p.lay.dvp / kW, p.nv, p.batch.num_seqs), dim3(kThreads), smem, stream, p);
}

template <GdnChunkedVariant kVariant>
cudaError_t LaunchRecurrence(const GdnChunkParams& p, bool exact, cudaStream_t stream) {
  return exact ? LaunchRecurrence<kVariant, true>(p, stream) : LaunchRecurrence<kVariant, false>(p, stream);
}

}  // namespace
}  // namespace gdn_chunked

size_t GdnChunkedSmemBytes(int dk, int dv, GdnChunkedVariant variant) {
  return GdnChunkedSmemBytesOf(MakeGdnChunkLayout(dk, dv), variant);
}

bool GdnChunkedFitsDevice(int dk, int dv, GdnChunkedVariant variant) {
  return dk >= 1 && dk <= kGdnChunkedMaxDk &&
         GdnChunkedSmemBytes(dk, dv, variant) <= static_cast<size_t>(DeviceSharedMemory().per_block);
}

std::optional<GdnChunkedVariant> GdnChunkedVariantFor(int dk, int dv) {
  for (const GdnChunkedVariant v : {GdnChunkedVariant::kLarge, GdnChunkedVariant::kSmall}) {
    if (GdnChunkedFitsDevice(dk, dv, v)) return v;
  }
  return std::nullopt;
}

cudaError_t LaunchGatedDeltaNetChunked(const GdnInput& in, const GdnShape& shape, const float* a_log,
                                       const float* dt_bias, const float* norm_w, float eps,
                                       const RaggedBatchDevice& batch, int min_tokens, GdnChunkedVariant variant,
                                       bool exact, GdnStateRef state, __half* out, void* workspace,
                                       size_t workspace_bytes, cudaStream_t stream) {
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
  err = variant == GdnChunkedVariant::kLarge ? gc::LaunchRecurrence<GdnChunkedVariant::kLarge>(p, exact, stream)
                                             : gc::LaunchRecurrence<GdnChunkedVariant::kSmall>(p, exact, stream);
  if (err != cudaSuccess) return err;
  return LaunchStepKernel(gc::GdnChunkOutputKernel, dim3(shape.nv, p.num_slots), dim3(gc::kThreads), 0, stream, p);
}

}  // namespace sparkserve::kernels::cuda
