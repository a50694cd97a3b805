// Gated full attention on CUDA over the paged KV cache, bf16 or FP8 E4M3 (FORMATS.md §1, §3
// kv_cache_scheme): the fused q/k-norm + partial RoPE + KV write, and causal GQA attention for
// ragged steps (prefill chunks, decode, MTP verify) with the output gate sigmoid(gate) applied on
// the way out. CPU twins: kernels/cpu attention.cc, rope.cc, norm.cc, activation.cc (MulSigmoid);
// the FP8 cache as model/activation_fake_quant.cc simulates it (FakeQuantizeFp8).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "kernels/cuda/ragged_batch.h"

namespace sparkserve::kernels::cuda {

// Element type of a KV pool.
enum class KvDtype : int {
  kBf16 = 0,     // __nv_bfloat16, 2 bytes: the value itself (k_scale / v_scale unused)
  kFp8E4M3 = 1,  // float8_e4m3fn, 1 byte: stored = e4m3(x / scale), read = e4m3 * scale
};

// One attention layer's paged cache: K and V pools [num_pages, page_size, kv_heads, head_dim] of
// `dtype` elements (2 bytes for bf16, 1 for fp8), 16-byte aligned. FP8 follows the compressed-tensors
// / vLLM convention with the checkpoint's per-layer (per-tensor) scales: the write stores
// e4m3(x / scale) (IEEE division, then round to nearest even saturating at +-448: the bytes
// quant::F32ToE4M3 gives and model/activation_fake_quant.cc's FakeQuantizeFp8 uses; a NaN input
// may lose its sign) and attention reads e4m3 * scale.
struct KvPoolDevice {
  void* k = nullptr;
  void* v = nullptr;
  int num_pages = 0;
  int page_size = 0;
  int kv_heads = 0;
  int head_dim = 0;
  KvDtype dtype = KvDtype::kBf16;
  float k_scale = 1.0f;  // fp8 only: K = e4m3 * k_scale
  float v_scale = 1.0f;  // fp8 only: V = e4m3 * v_scale
};

inline int KvDtypeBytes(KvDtype d) { return d == KvDtype::kFp8E4M3 ? 1 : 2; }

// Per token t (position batch.positions[t], seq batch.token_seq[t]):
//   q_out[t, h, :] = rope(rmsnorm_zc(q[t, h, :], q_norm))       for h < heads
//   K[page, slot, g, :] = rope(rmsnorm_zc(k[t, g, :], k_norm)),  V[...] = v[t, g, :]   for g < kv_heads
// with page = page_table[seq][pos / page_size], slot = pos % page_size (K and V stored in kv.dtype,
// fp8 through kv.k_scale / kv.v_scale as KvPoolDevice says). Element i of head h of q is
// q[t * q_row_stride + h * q_head_stride + i] (q_proj interleaves q and gate per head:
// q_head_stride = 2 * head_dim); k and v heads are contiguous at k[t * k_row_stride + g * head_dim].
// rope: rotate-half on the first rot_dim dims, pairs (i, i + rot_dim/2) by pos * theta^(-2i/rot_dim).
// q_out f32 [T, heads, head_dim].
struct QkvInput {
  const float* q = nullptr;
  int q_row_stride = 0, q_head_stride = 0;
  const float* k = nullptr;
  int k_row_stride = 0;
  const float* v = nullptr;
  int v_row_stride = 0;
};
absl::Status QkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps, int heads,
                               int rot_dim, float rope_theta, const RaggedBatchDevice& batch, const KvPoolDevice& kv,
                               float* q_out, cudaStream_t stream);

// Scratch PagedAttention needs for any step of up to `num_tokens` tokens (split partials of the
// split-K or decode kernel; at most ~4 x SMs x heads x (head_dim + 2) floats for decode steps).
size_t PagedAttentionWorkspaceBytes(int num_tokens, int heads, int head_dim);

// Which kernels PagedAttention runs. kAuto is for everyone; tests pin the others to compare paths.
enum class AttentionPath {
  kAuto,          // seqs of > 4 tokens: kPrefill when the shape allows it, else split-K; seqs of <= 4
                  // tokens: kDecode when the shape allows it, else split-K
  kSplitK,        // the split-K CUDA-core kernel for every token (f32 math)
  kPrefill,       // the tensor-core flash kernel for seqs of > 4 tokens (largest tile the GPU fits)
  kPrefillSmall,  // the same with the small tile (64 rows x 32 keys; what sm_120/121 run at head_dim 256)
  kDecode,        // the tensor-core decode kernel for seqs of <= 4 tokens (head_dim 64/128/256 only;
                  // longer seqs as kAuto)
};

// out[t, h, :] = (softmax(scale * q[t, h] . K[0..pos]) V) * sigmoid(gate[t, h, :]) as f16: token t at
// position pos attends to positions [0, pos] of its seq (the cache already holds the step's own k/v),
// query head h reads kv head h / (heads / kv_heads). gate element i of head h at
// gate[t * gate_row_stride + h * gate_head_stride + i]. q f32 [T, heads, head_dim]; out f16
// [T, heads * head_dim]. Kernels (chosen on host-known sizes only, never on context lengths):
//   - tensor-core decode kernel (attention_decode.cu) for the seqs of <= 4 tokens (decode, MTP
//     verify, the decode seqs of a mixed step) when head_dim is 64, 128 or 256: mma.sync m16n8k16
//     with every query head of a kv head and every token of the seq as the 8 columns, K/V read
//     once through a cp.async ring, bf16 mma for bf16 pools and f16 for fp8 (exact codes), q and
//     p split into hi + lo operands so the result matches the f32 kernel; graph-capturable: the
//     context splits come from num_seqs x kv_heads vs the SM count, lengths are read on the device;
//   - split-K kernel (f32 math on CUDA cores): the seqs of <= 4 tokens for other head dims (16, 24,
//     32, ... in the golden fixtures) or when pinned (kSplitK);
//   - flash prefill kernel (prefill_attention.cu: mma.sync m16n8k16 f16 operands, f32 online
//     softmax and accumulation): the seqs of > 4 tokens when head_dim is 64, 128 or 256 and
//     heads / kv_heads <= 16. q is rounded to f16 (pre-scaled by scale * log2 e), bf16 K/V widened
//     to f16 (exact; saturating at +-65504), fp8 K/V decoded to f16 (exact), probabilities rounded to
//     f16 for P V. Other head dims (16, 24, 32, ... in the golden fixtures) take the split-K kernel's
//     tile path (CUDA cores) for prefill too.
// `workspace`: PagedAttentionWorkspaceBytes(T, heads, head_dim) bytes, 16-byte aligned (split
// partials; may be null when that is 0). The decode kernel reads the step's metadata (token_begin,
// positions, page_table) before waiting on the previous kernel (PDL): it must be host-written
// before the step, as the runner's metadata upload is.
absl::Status PagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                            const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                            int gate_head_stride, __half* out, void* workspace, cudaStream_t stream,
                            AttentionPath path = AttentionPath::kAuto);

}  // namespace sparkserve::kernels::cuda
