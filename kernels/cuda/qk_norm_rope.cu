// QkNormRopeKvWrite: the fused q/k zero-centred RMSNorm + partial RoPE + paged KV write (bf16, or
// fp8 e4m3 through the layer's k/v scales) that precedes attention (attention.h), one block per token.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_kv.cuh"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWriteThreads = 256;

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) x += __shfl_xor_sync(kFullMask, x, off);
  return x;
}

// One block per token, K/V stored as Kv elements. Rows of the token: [0, heads) q heads, [heads, heads + kvh) k heads,
// [heads + kvh, heads + 2 kvh) v heads; warp w takes rows w, w + warps, ... Shared memory:
// cos [rot_dim / 2], sin [rot_dim / 2], then one row buffer [head_dim] a warp.
template <typename Kv>
__global__ void __launch_bounds__(kWriteThreads)
    QkNormRopeKvWriteKernel(QkvInput in, const float* __restrict__ q_norm, const float* __restrict__ k_norm,
                            float eps, int heads, int rot_dim, float rope_theta, RaggedBatchDevice batch,
                            KvPoolDevice kv, float* __restrict__ q_out) {
  WaitForPriorGrids();
  AllowNextGrid();
  extern __shared__ float write_smem[];
  const int t = blockIdx.x;
  const int hd = kv.head_dim, half = rot_dim / 2;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float* cos_t = write_smem;
  float* sin_t = write_smem + half;
  float* row = write_smem + 2 * half + warp * hd;
  const int pos = batch.positions[t];

  // Angles as the fp32 reference computes them (inv_freq rounded to fp32, times the fp32
  // position), then an accurate sin/cos of that fp32 angle: --use_fast_math would turn sinf/cosf
  // into the approximate units, which are wrong for angles of thousands of radians.
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float inv_freq =
        static_cast<float>(1.0 / pow(static_cast<double>(rope_theta), static_cast<double>(2 * i) / rot_dim));
    const float angle = static_cast<float>(pos) * inv_freq;
    double s, c;
    sincos(static_cast<double>(angle), &s, &c);
    cos_t[i] = static_cast<float>(c);
    sin_t[i] = static_cast<float>(s);
  }
  __syncthreads();

  const int seq = batch.token_seq[t];
  const int page = batch.page_table[static_cast<size_t>(seq) * batch.pages_stride + pos / kv.page_size];
  const bool page_ok = page >= 0 && page < kv.num_pages;  // the host validates tables; never write outside
  const size_t kv_row = (static_cast<size_t>(page) * kv.page_size + pos % kv.page_size) * kv.kv_heads * hd;

  const int rows = heads + 2 * kv.kv_heads;
  for (int r = warp; r < rows; r += warps) {  // r is warp-uniform
    if (r >= heads + kv.kv_heads) {  // v head: a copy in the pool's format
      if (!page_ok) continue;
      const int g = r - heads - kv.kv_heads;
      const float* src = in.v + static_cast<size_t>(t) * in.v_row_stride + static_cast<size_t>(g) * hd;
      const size_t dst = kv_row + static_cast<size_t>(g) * hd;
      for (int i = lane; i < hd; i += 32) Kv::Store(kv.v, dst + i, src[i], kv.v_scale);
      continue;
    }
    const bool is_q = r < heads;
    if (!is_q && !page_ok) continue;
    const float* src = is_q ? in.q + static_cast<size_t>(t) * in.q_row_stride + static_cast<size_t>(r) * in.q_head_stride
                            : in.k + static_cast<size_t>(t) * in.k_row_stride + static_cast<size_t>(r - heads) * hd;
    const float* w = is_q ? q_norm : k_norm;
    float ss = 0.f;
    for (int i = lane; i < hd; i += 32) {
      const float x = src[i];
      row[i] = x;
      ss += x * x;
    }
    const float inv = 1.0f / sqrtf(WarpSum(ss) / static_cast<float>(hd) + eps);
    for (int i = lane; i < hd; i += 32) row[i] = (row[i] * inv) * (1.0f + w[i]);  // own elements only
    __syncwarp();  // RoPE reads partners written by other lanes
    for (int i = lane; i < hd; i += 32) {
      float y = row[i];
      if (i < half) {
        y = row[i] * cos_t[i] - row[i + half] * sin_t[i];
      } else if (i < rot_dim) {
        const int j = i - half;
        y = row[i] * cos_t[j] + row[j] * sin_t[j];
      }
      if (is_q) {
        q_out[(static_cast<size_t>(t) * heads + r) * hd + i] = y;
      } else {
        Kv::Store(kv.k, kv_row + static_cast<size_t>(r - heads) * hd + i, y, kv.k_scale);
      }
    }
    __syncwarp();  // the next row overwrites the buffer
  }
}

}  // namespace

cudaError_t LaunchQkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps,
                                    int heads, int rot_dim, float rope_theta, const RaggedBatchDevice& batch,
                                    const KvPoolDevice& kv, float* q_out, cudaStream_t stream) {
  const size_t smem = (static_cast<size_t>(rot_dim / 2) * 2 + static_cast<size_t>(kWriteThreads / 32) * kv.head_dim) *
                      sizeof(float);
  auto kernel = kv.dtype == KvDtype::kFp8E4M3 ? QkNormRopeKvWriteKernel<Fp8Kv> : QkNormRopeKvWriteKernel<Bf16Kv>;
  LaunchStepKernel(kernel, dim3(batch.num_tokens), dim3(kWriteThreads), smem, stream, in, q_norm, k_norm, eps, heads,
                   rot_dim, rope_theta, batch, kv, q_out);
  return cudaGetLastError();
}

}  // namespace sparkserve::kernels::cuda
