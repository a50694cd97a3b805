// Chunked Gated DeltaNet, kernel 1 of 3 (gdn.h has the algebra): prepares every 64-token chunk of
// every value head in parallel and writes it to the workspace as one record (gdn_kernels.h
// GdnChunkLayout): W = T diag(beta gamma) K, U = T diag(beta) V, the decayed keys transposed, diag(gamma)
// Q and the intra-chunk P, and exp(G_last).
//
// A block (256 threads) takes one (value head, chunk slot); slots that are gaps between seqs, or
// chunks of seqs left to the sequential kernel, exit at once. Phases (barriers between):
//   1. q, k rows of the key head into shared memory (cp.async, zeros past the chunk / dk), the gates.
//   2. warp 0: the cumulative log decay G and the per-token factors; every warp: L2 norms of q, k.
//   3. Gram tiles on or below the diagonal: A = beta_t exp(G_t - G_s) k_t.k_s (strictly lower, 3xTF32
//      into shared memory) and P (TF32, straight to the record as f16); diag(gamma) Q (f16) and the
//      decayed keys (f32, transposed) to the record.
//   4. the v rows load (cp.async, into q's space) while T = (I + A)^-1 is formed blockwise in f32,
//      in place over A: the four 16x16 diagonal blocks by forward substitution, then block rows
//      1..3 (T_ij = -T_ii sum_{k=j}^{i-1} A_ik T_kj for every j < i), element-parallel. Block row i
//      reads only A's block row i and T's rows above it, so it overwrites A's row i once its sums are
//      taken (a barrier between): no second 64 x 64 array, which keeps the kernel at 88 KB for dk =
//      128 (inside sm_120's 99 KB).
//   5. W and U as 3xTF32 products T (scaled K | scaled V), only T's nonzero 16x16 blocks.
// Precision: everything that feeds the state (A, T, W, U, the decayed keys) is f32 or 3xTF32; Q and P
// feed only the output and are stored as f16 (10 mantissa bits, as TF32, which the recurrence's
// output products round them to anyway; |entries| <= dk^-0.5, far inside f16's range).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/gdn_chunked.cuh"
#include "kernels/cuda/gdn_math.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda::gdn_chunked {
namespace {

// Shared memory of the prep kernel, in floats from the base.
struct PrepSmem {
  int ldk, ldv;  // q / k row stride (= 4 mod 8: fragment reads of row-major tiles hit 32 banks), v's (= 8 mod 32)
  int k, a, m, gates, total;  // offsets (q and then v at 0; A, then T in place, at a)
};

__host__ __device__ constexpr PrepSmem MakePrepSmem(const GdnChunkLayout& lay) {
  PrepSmem s{};
  s.ldk = lay.dkp + 4;
  s.ldv = lay.dvp + 8;
  s.k = kC * (s.ldk > s.ldv ? s.ldk : s.ldv);
  s.a = s.k + kC * s.ldk;
  s.m = s.a + kC * kLdKt;
  s.gates = s.m + 3 * 16 * 17;  // [5][64]: G, beta, gamma, beta gamma, exp(G_last - G)
  s.total = s.gates + 5 * kC;
  return s;
}
static_assert(4 * MakePrepSmem(MakeGdnChunkLayout(128, 128)).total == GdnPrepSmemBytes(MakeGdnChunkLayout(128, 128)) &&
                  4 * MakePrepSmem(MakeGdnChunkLayout(24, 16)).total == GdnPrepSmemBytes(MakeGdnChunkLayout(24, 16)),
              "gdn_kernels.h GdnPrepSmemBytes must count what the kernel carves");

template <bool kExact>
__global__ void __launch_bounds__(kThreads, 2) GdnChunkPrepKernel(const GdnChunkParams p) {
  WaitForPriorGrids();
  AllowNextGrid();
  const int j = static_cast<int>(blockIdx.x);
  const ChunkRef ref = LocateChunk(p, static_cast<int>(blockIdx.y));
  if (!ref.valid) return;  // the same for the whole block

  extern __shared__ __align__(16) float smem[];
  const GdnChunkLayout& L = p.lay;
  const PrepSmem sm = MakePrepSmem(L);
  float* Qs = smem;  // [64][ldk], later V [64][ldv]
  float* Vs = smem;
  float* Ks = smem + sm.k;
  float* As = smem + sm.a;  // A, turned into T in place in phase 4
  float* Ts = As;
  float* Ms = smem + sm.m;
  float* G = smem + sm.gates;
  float* beta = G + kC;
  float* gam = beta + kC;
  float* bg = gam + kC;
  float* kdec = bg + kC;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = LaneG(), t = LaneT();
  const int dk = p.dk, dv = p.dv, dkp = L.dkp, dvp = L.dvp, ldk = sm.ldk, ldv = sm.ldv;
  const int n = ref.n;
  const int kh = j / (p.nv / p.nk);
  const float* rows = p.mixed + static_cast<size_t>(ref.tok_abs) * p.mixed_stride;  // the chunk's first token
  const int q_off = kh * dk, k_off = (p.nk + kh) * dk, v_off = 2 * p.nk * dk + j * dv;

  uint8_t* rec = p.records + (static_cast<size_t>(blockIdx.y) * p.nv + j) * static_cast<size_t>(L.bytes);
  float* Wg = reinterpret_cast<float*>(rec + L.w_off);
  float* KTg = reinterpret_cast<float*>(rec + L.kt_off);
  __half* Qg = reinterpret_cast<__half*>(rec + L.q_off);
  __half* Pg = reinterpret_cast<__half*>(rec + L.p_off);
  float* Ug = reinterpret_cast<float*>(rec + L.u_off);

  // Rows [64][cols] of the step's mixed buffer at column `off` into dst (row stride ld): zeros for
  // rows >= n and columns >= width. 16-byte pieces when every row start is 16-byte aligned.
  auto load_rows = [&](float* dst, int ld, int off, int width, int cols) {
    if (p.vec_loads) {
      const int pieces = cols / 4;
      for (int i = tid; i < kC * pieces; i += kThreads) {
        const int r = i / pieces, c = 4 * (i - r * pieces);
        const bool ok = r < n && c < width;
        CpAsync16(dst + r * ld + c, ok ? rows + static_cast<size_t>(r) * p.mixed_stride + off + c : rows, ok);
      }
    } else {
      for (int i = tid; i < kC * cols; i += kThreads) {
        const int r = i / cols, c = i - r * cols;
        const bool ok = r < n && c < width;
        CpAsync4(dst + r * ld + c, ok ? rows + static_cast<size_t>(r) * p.mixed_stride + off + c : rows, ok);
      }
    }
    CpAsyncCommit();
  };

  // ---- 1. q, k rows; the gates (padding tokens: no decay, no write)
  load_rows(Qs, ldk, q_off, dk, dkp);
  load_rows(Ks, ldk, k_off, dk, dkp);
  if (tid < kC) {
    float gt = 0.0f, bt = 0.0f;
    if (tid < n) {
      const size_t at = static_cast<size_t>(ref.tok_abs + tid) * p.ab_stride + j;
      const float ax = __ldg(p.a + at) + __ldg(p.dt_bias + j);
      gt = GdnLogDecay(ax, expf(__ldg(p.a_log + j)));
      bt = GdnBeta(__ldg(p.b + at));
    }
    G[tid] = gt;
    beta[tid] = bt;
  }
  CpAsyncWait<0>();
  __syncthreads();

  // ---- 2. cumulative G (warp 0, two tokens a lane) and the factors; L2 norms (eps inside the rsqrt)
  if (warp == 0) {
    const float g0 = G[2 * lane], g1 = G[2 * lane + 1];
    float incl = g0 + g1;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float v = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += v;
    }
    float excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.0f;
    const float G0 = excl + g0, G1 = G0 + g1;
    const float g_last = __shfl_sync(0xffffffffu, G1, 31);  // == G[63]: padding tokens add 0
    __syncwarp();
    G[2 * lane] = G0;
    G[2 * lane + 1] = G1;
    gam[2 * lane] = expf(G0);
    gam[2 * lane + 1] = expf(G1);
    bg[2 * lane] = beta[2 * lane] * expf(G0);
    bg[2 * lane + 1] = beta[2 * lane + 1] * expf(G1);
    kdec[2 * lane] = expf(g_last - G0);
    kdec[2 * lane + 1] = expf(g_last - G1);
  }
  for (int r = warp; r < n; r += kWarps) {
    float sq = 0.0f, sk = 0.0f;
    for (int d = lane; d < dk; d += 32) {
      const float q = Qs[r * ldk + d], k = Ks[r * ldk + d];
      sq = fmaf(q, q, sq);
      sk = fmaf(k, k, sk);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, off);
      sk += __shfl_xor_sync(0xffffffffu, sk, off);
    }
    const float iq = rsqrtf(sq + 1e-6f) * p.q_scale, ik = rsqrtf(sk + 1e-6f);
    for (int d = lane; d < dk; d += 32) {
      Qs[r * ldk + d] *= iq;
      Ks[r * ldk + d] *= ik;
    }
  }
  __syncthreads();

  // ---- 3. Gram tiles: task < 20 A (3xTF32), else P (TF32); row tile rt has column tiles 0..2rt+1
  for (int task = warp; task < 40; task += kWarps) {
    const bool is_a = task < 20;
    const int idx = is_a ? task : task - 20;
    const int rt = idx < 2 ? 0 : idx < 6 ? 1 : idx < 12 ? 2 : 3;
    const int ct = idx - (rt == 0 ? 0 : rt == 1 ? 2 : rt == 2 ? 6 : 12);
    float big[4] = {0.0f, 0.0f, 0.0f, 0.0f}, small[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float* arows = (is_a ? Ks : Qs) + rt * 16 * ldk;
    const float* brows = Ks + ct * 8 * ldk;  // B(k, c) = k_{8ct + c}[k]
    for (int k0 = 0; k0 < dkp; k0 += 8) {
      uint32_t ah[4], al[4], bh[2], bl[2];
      LoadA<kExact>(ah, al, arows + k0, ldk);
      LoadBNK<kExact>(bh, bl, brows + k0, ldk);
      if (is_a) {
        Mma3<kExact>(big, small, ah, al, bh, bl);
      } else {
        Mma1<kExact>(big, ah, bh);
      }
    }
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = rt * 16 + g + 8 * (e >> 1), c = ct * 8 + 2 * t + (e & 1);
      if (is_a) {
        v[e] = c < r ? beta[r] * expf(G[r] - G[c]) * (big[e] + small[e]) : 0.0f;
        As[r * kLdKt + c] = v[e];
      } else {
        v[e] = c <= r ? expf(G[r] - G[c]) * big[e] : 0.0f;
      }
    }
    if (!is_a) {
      const int r = rt * 16 + g, c = ct * 8 + 2 * t;
      *reinterpret_cast<__half2*>(Pg + r * kLdP + c) = __floats2half2_rn(v[0], v[1]);
      *reinterpret_cast<__half2*>(Pg + (r + 8) * kLdP + c) = __floats2half2_rn(v[2], v[3]);
    }
  }
  // diag(gamma) Q as f16 [64][ldq] (columns < dkp), the decayed keys transposed [dkp][68] (columns < 64).
  const int half_cols = dkp / 2;
  for (int i = tid; i < kC * half_cols; i += kThreads) {
    const int r = i / half_cols, d = 2 * (i - r * half_cols);
    *reinterpret_cast<__half2*>(Qg + r * L.ldq + d) =
        __floats2half2_rn(gam[r] * Qs[r * ldk + d], gam[r] * Qs[r * ldk + d + 1]);
  }
  for (int i = tid; i < dkp * kC; i += kThreads) {
    const int d = i >> 6, s = i & (kC - 1);
    KTg[d * kLdKt + s] = kdec[s] * Ks[s * ldk + d];
  }
  if (tid == 0) *reinterpret_cast<float4*>(rec + L.decay_off) = make_float4(gam[kC - 1], 0.0f, 0.0f, 0.0f);
  __syncthreads();  // q is dead: v may take its space

  // ---- 4. v rows (in flight during the inverse); T = (I + A)^-1
  load_rows(Vs, ldv, v_off, dv, dvp);
  {  // diagonal block bi, column l: forward substitution, written over A_ii once every column is done
    const bool diag = tid < kC;
    const int bi = tid >> 4, l = tid & 15, o = 16 * bi;
    float x[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      float acc = r == l ? 1.0f : 0.0f;
      if (diag) {
#pragma unroll
        for (int c = 0; c < r; ++c) acc = fmaf(-As[(o + r) * kLdKt + o + c], x[c], acc);
      }
      x[r] = acc;
    }
    __syncthreads();  // A_ii read by every column; never read again
    if (diag) {
#pragma unroll
      for (int r = 0; r < 16; ++r) Ts[(o + r) * kLdKt + o + l] = x[r];  // zeros above the diagonal too
    }
    __syncthreads();
  }
  // Block row bi: block (bi, bj) for every bj < bi from A's block row bi and T's block rows above.
  // A thread owns column c and rows 4 rg .. 4 rg + 3 of block bj = tid / 64; M (= sum A_ik T_kj) in
  // Ms. The sums read all of A's row bi before the barrier; T's blocks then replace it.
  for (int bi = 1; bi < 4; ++bi) {
    const bool active = tid < 64 * bi;
    const int bj = tid >> 6, c = tid & 15, rg = (tid >> 4) & 3;
    if (active) {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const int r = 4 * rg + rr;
        const float* arow = As + (16 * bi + r) * kLdKt;
        float m = 0.0f;
        for (int k = 16 * bj; k < 16 * bi; ++k) m = fmaf(arow[k], Ts[k * kLdKt + 16 * bj + c], m);
        Ms[(bj * 16 + r) * 17 + c] = m;
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const int r = 4 * rg + rr;
        const float* trow = Ts + (16 * bi + r) * kLdKt + 16 * bi;
        float acc = 0.0f;
        for (int q = 0; q <= r; ++q) acc = fmaf(trow[q], Ms[(bj * 16 + q) * 17 + c], acc);
        Ts[(16 * bi + r) * kLdKt + 16 * bj + c] = -acc;
      }
    }
    __syncthreads();
  }
  CpAsyncWait<0>();
  __syncthreads();

  // ---- 5. [W | U] = T [diag(beta gamma) K | diag(beta) V]: n-tiles warp + 8i (W's first), T's
  // row tile mt needs its first 2 (mt + 1) k-steps only (lower triangular by 16x16 blocks).
  const int ntw = dkp / 8, nt_all = ntw + dvp / 8;  // <= 32: 4 n-tiles a warp at most
  for (int mt = 0; mt < 4; ++mt) {
    float big[4][4], small[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) big[i][e] = small[i][e] = 0.0f;
    }
    for (int ks = 0; ks < 2 * (mt + 1); ++ks) {
      const int k0 = 8 * ks;
      uint32_t ah[4], al[4];
      LoadA<kExact>(ah, al, Ts + mt * 16 * kLdKt + k0, kLdKt);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int nt = warp + kWarps * i;
        if (nt >= nt_all) continue;  // warp-uniform
        uint32_t bh[2], bl[2];
        if (nt < ntw) {
          LoadBKN<kExact>(bh, bl, Ks + k0 * ldk + 8 * nt, ldk, bg[k0 + t], bg[k0 + t + 4]);
        } else {
          LoadBKN<kExact>(bh, bl, Vs + k0 * ldv + 8 * (nt - ntw), ldv, beta[k0 + t], beta[k0 + t + 4]);
        }
        Mma3<kExact>(big[i], small[i], ah, al, bh, bl);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int nt = warp + kWarps * i;
      if (nt >= nt_all) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = mt * 16 + g + 8 * h;
        const float2 v = make_float2(big[i][2 * h] + small[i][2 * h], big[i][2 * h + 1] + small[i][2 * h + 1]);
        if (nt < ntw) {
          *reinterpret_cast<float2*>(Wg + r * L.ldw + 8 * nt + 2 * t) = v;
        } else {
          *reinterpret_cast<float2*>(Ug + r * dvp + 8 * (nt - ntw) + 2 * t) = v;
        }
      }
    }
  }
}

template <bool kExact>
cudaError_t LaunchPrep(const GdnChunkParams& p, cudaStream_t stream) {
  const size_t smem = GdnChunkPrepSmemBytes(p.lay);
  const cudaError_t attr = cudaFuncSetAttribute(GdnChunkPrepKernel<kExact>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (attr != cudaSuccess) return attr;
  return LaunchStepKernel(GdnChunkPrepKernel<kExact>, dim3(p.nv, p.num_slots), dim3(kThreads), smem, stream, p);
}

}  // namespace

size_t GdnChunkPrepSmemBytes(const GdnChunkLayout& lay) { return GdnPrepSmemBytes(lay); }

cudaError_t LaunchGdnChunkPrep(const GdnChunkParams& p, bool exact, cudaStream_t stream) {
  return exact ? LaunchPrep<true>(p, stream) : LaunchPrep<false>(p, stream);
}

}  // namespace sparkserve::kernels::cuda::gdn_chunked
