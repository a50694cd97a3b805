// The split combine of the tensor-core decode kernel (attention_decode.cu): merges the splits'
// (acc, m, l) partials of each (token, query head) of a short seq, normalises, gates, writes f16.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/step_launch.h"

namespace sparkserve::kernels::cuda::decode_attention {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxCombineGroups = 16;

// Block-wide reduction of one float (max or sum) through `scratch` [32]; every thread gets it.
template <bool kMax>
__device__ __forceinline__ float BlockReduce(float v, float* scratch) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const float o = __shfl_xor_sync(kFullMask, v, off);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  const int warps = (blockDim.x + 31) / 32;
  __syncthreads();  // scratch may hold a previous reduction's values
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = kMax ? -INFINITY : 0.f;
  for (int w = 0; w < warps; ++w) r = kMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

// grid (T, heads), (HD / 4) * groups threads: out[t, h] = merge of the non-empty splits' partials
// of (t, h), normalised, times v_mul, gated. Thread (group gi, dims 4 d4 ..): splits gi, gi + groups,
// ... (all loads of a thread independent); groups summed through shared memory.
// Dynamic shared memory: weight [splits], then the group sums [groups][HD].
template <int HD>
__global__ void DecodeCombineKernel(DecodeParams p) {
  extern __shared__ __align__(16) float combine_smem[];
  __shared__ float scratch[32];
  const int t = blockIdx.x, h = blockIdx.y;
  const RaggedBatchDevice& bt = p.batch;
  const int seq = bt.token_seq[t];
  const int tb = bt.token_begin[seq], n = bt.token_begin[seq + 1] - tb;
  if (n > kPerTokenMaxTokens) return;  // block-uniform: another kernel writes this token
  const int group = p.group, ncols = n * group;
  const int col = (t - tb) * group + h % group;
  const int ctx = ColumnTileContext(bt, tb, ncols, col / kCols * kCols, group);
  const int chunk = SplitChunk(ctx, p.num_splits);
  const int nz = min(p.num_splits, (ctx + chunk - 1) / chunk);  // splits that hold keys
  WaitForPriorGrids();
  AllowNextGrid();

  float* weight = combine_smem;                                // [num_splits]
  float* partial = combine_smem + (p.num_splits + 3) / 4 * 4;  // [groups][HD], 16-byte aligned
  const size_t split_stride = static_cast<size_t>(bt.num_tokens) * p.heads;
  const size_t row = static_cast<size_t>(t) * p.heads + h;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < nz; s += blockDim.x) mx = fmaxf(mx, p.ws.m[s * split_stride + row]);
  mx = BlockReduce<true>(mx, scratch);
  const float base = mx == -INFINITY ? 0.f : mx;
  float lsum = 0.f;
  for (int s = threadIdx.x; s < nz; s += blockDim.x) {
    const float ms = p.ws.m[s * split_stride + row];
    const float w = ms == -INFINITY ? 0.f : exp2f(ms - base);  // a split with no key for this column
    weight[s] = w;
    lsum += w != 0.f ? w * p.ws.l[s * split_stride + row] : 0.f;
  }
  lsum = BlockReduce<false>(lsum, scratch);  // its barriers also publish weight[]

  constexpr int kLanes = HD / 4;
  const int groups = blockDim.x / kLanes, gi = threadIdx.x / kLanes, d = (threadIdx.x % kLanes) * 4;
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int s = gi; s < nz; s += groups) {
    const float w = weight[s];
    if (w == 0.f) continue;
    const float4 x = *reinterpret_cast<const float4*>(p.ws.acc + (s * split_stride + row) * HD + d);
    sum.x += w * x.x;
    sum.y += w * x.y;
    sum.z += w * x.z;
    sum.w += w * x.w;
  }
  *reinterpret_cast<float4*>(partial + gi * HD + d) = sum;
  __syncthreads();
  if (gi != 0) return;
  for (int k = 1; k < groups; ++k) {
    const float4 x = *reinterpret_cast<const float4*>(partial + k * HD + d);
    sum.x += x.x;
    sum.y += x.y;
    sum.z += x.z;
    sum.w += x.w;
  }
  const float inv = p.v_mul / lsum;
  const float* gate = p.gate + static_cast<size_t>(t) * p.gate_row_stride + static_cast<size_t>(h) * p.gate_head_stride;
  __half* out = p.out + row * HD;
  const float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) out[d + j] = __float2half_rn(v[j] * inv / (1.0f + __expf(-gate[d + j])));
}

}  // namespace

cudaError_t LaunchDecodeCombine(const DecodeParams& p, cudaStream_t stream) {
  int groups = 1;
  while (groups < p.num_splits && groups < kMaxCombineGroups) groups *= 2;
  const int hd = p.kv.head_dim;
  const size_t smem =
      (static_cast<size_t>(p.num_splits + 3) / 4 * 4 + static_cast<size_t>(groups) * hd) * sizeof(float);
  const dim3 grid(p.batch.num_tokens, p.heads), block(groups * hd / 4);
  switch (hd) {
    case 64:
      return LaunchStepKernel(DecodeCombineKernel<64>, grid, block, smem, stream, p);
    case 128:
      return LaunchStepKernel(DecodeCombineKernel<128>, grid, block, smem, stream, p);
    default:
      return LaunchStepKernel(DecodeCombineKernel<256>, grid, block, smem, stream, p);
  }
}

}  // namespace sparkserve::kernels::cuda::decode_attention
