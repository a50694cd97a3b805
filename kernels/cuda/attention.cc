// Gated full attention: argument checks, workspace sizing and the choice between the split-K kernel
// (attention.cu) and the flash prefill kernel (prefill_attention.cu).
#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::kernels::cuda {
namespace {

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(what); }

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

absl::Status CheckPool(const char* op, const KvPoolDevice& kv) {
  if (kv.k == nullptr || kv.v == nullptr) return Invalid(fmt::format("{}: KV pool pointers are null", op));
  if (kv.num_pages < 1 || kv.page_size < 1 || kv.kv_heads < 1) {
    return Invalid(fmt::format("{}: KV pool needs num_pages, page_size and kv_heads >= 1 (got {}, {}, {})", op,
                               kv.num_pages, kv.page_size, kv.kv_heads));
  }
  if (kv.head_dim < 1 || kv.head_dim > kAttnMaxHeadDim) {
    return Invalid(fmt::format("{}: head_dim {} outside [1, {}]", op, kv.head_dim, kAttnMaxHeadDim));
  }
  if (kv.dtype != KvDtype::kBf16 && kv.dtype != KvDtype::kFp8E4M3) {
    return Invalid(fmt::format("{}: KV dtype {} is neither bf16 nor fp8 e4m3", op, static_cast<int>(kv.dtype)));
  }
  if (kv.dtype == KvDtype::kFp8E4M3 &&
      !(kv.k_scale > 0.0f && std::isfinite(kv.k_scale) && kv.v_scale > 0.0f && std::isfinite(kv.v_scale))) {
    return Invalid(fmt::format("{}: fp8 KV scales must be positive and finite (k_scale {}, v_scale {})", op,
                               kv.k_scale, kv.v_scale));
  }
  return absl::OkStatus();
}

absl::Status CheckBatch(const char* op, const RaggedBatchDevice& b) {
  if (b.num_seqs < 1) return Invalid(fmt::format("{}: batch of {} tokens has {} seqs", op, b.num_tokens, b.num_seqs));
  if (b.token_begin == nullptr || b.token_seq == nullptr || b.positions == nullptr || b.page_table == nullptr) {
    return Invalid(fmt::format("{}: batch token_begin/token_seq/positions/page_table must be set", op));
  }
  if (b.pages_stride < 1) return Invalid(fmt::format("{}: page table stride {} < 1", op, b.pages_stride));
  return absl::OkStatus();
}

}  // namespace

absl::Status QkNormRopeKvWrite(const QkvInput& in, const float* q_norm, const float* k_norm, float eps, int heads,
                               int rot_dim, float rope_theta, const RaggedBatchDevice& batch, const KvPoolDevice& kv,
                               float* q_out, cudaStream_t stream) {
  constexpr const char* kOp = "QkNormRopeKvWrite";
  if (batch.num_tokens < 0) return Invalid(fmt::format("{}: num_tokens {} < 0", kOp, batch.num_tokens));
  if (batch.num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPool(kOp, kv));
  RETURN_IF_ERROR(CheckBatch(kOp, batch));
  const int hd = kv.head_dim;
  if (heads < 1) return Invalid(fmt::format("{}: heads {} < 1", kOp, heads));
  if (in.q == nullptr || in.k == nullptr || in.v == nullptr || q_norm == nullptr || k_norm == nullptr ||
      q_out == nullptr) {
    return Invalid(fmt::format("{}: q/k/v, q_norm/k_norm and q_out must be set", kOp));
  }
  if (in.q_head_stride < hd || in.q_row_stride < (heads - 1) * in.q_head_stride + hd) {
    return Invalid(fmt::format("{}: q strides (row {}, head {}) overlap for {} heads of {}", kOp, in.q_row_stride,
                               in.q_head_stride, heads, hd));
  }
  if (in.k_row_stride < kv.kv_heads * hd || in.v_row_stride < kv.kv_heads * hd) {
    return Invalid(fmt::format("{}: k/v row strides ({}, {}) shorter than {} kv heads of {}", kOp, in.k_row_stride,
                               in.v_row_stride, kv.kv_heads, hd));
  }
  if (rot_dim < 0 || rot_dim > hd || rot_dim % 2 != 0) {
    return Invalid(fmt::format("{}: rot_dim {} must be even and in [0, head_dim {}]", kOp, rot_dim, hd));
  }
  if (rot_dim > 0 && !(rope_theta > 0.0f && std::isfinite(rope_theta))) {
    return Invalid(fmt::format("{}: rope_theta {} must be positive", kOp, rope_theta));
  }
  if (!(eps >= 0.0f && std::isfinite(eps))) return Invalid(fmt::format("{}: eps {} must be >= 0", kOp, eps));
  return CudaStatus(
      LaunchQkNormRopeKvWrite(in, q_norm, k_norm, eps, heads, rot_dim, rope_theta, batch, kv, q_out, stream), kOp);
}

size_t PagedAttentionWorkspaceBytes(int num_tokens, int heads, int head_dim) {
  // Enough for every step of up to num_tokens tokens (the split counts fall as tokens grow, so the
  // largest need is not always at num_tokens). The decode kernel's splits are at most its cap for
  // the step's token count whatever the seqs and kv heads.
  const bool decode = DecodeAttentionSupports(head_dim);
  size_t most = 0;
  for (int t = 1; t <= num_tokens; ++t) {
    const int splits = AttentionSplits(t);
    const int decode_splits = decode ? DecodeAttentionSplitCap(t) : 1;
    if (splits <= 1 && decode_splits <= 1) break;
    most = std::max({most, AttentionPartialFloats(splits, t, heads, head_dim),
                     AttentionPartialFloats(decode_splits, t, heads, head_dim)});
  }
  return most * sizeof(float);
}

absl::Status PagedAttention(const float* q, int heads, float scale, const KvPoolDevice& kv,
                            const RaggedBatchDevice& batch, const float* gate, int gate_row_stride,
                            int gate_head_stride, __half* out, void* workspace, cudaStream_t stream,
                            AttentionPath path) {
  constexpr const char* kOp = "PagedAttention";
  if (batch.num_tokens < 0) return Invalid(fmt::format("{}: num_tokens {} < 0", kOp, batch.num_tokens));
  if (batch.num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckPool(kOp, kv));
  RETURN_IF_ERROR(CheckBatch(kOp, batch));
  const int hd = kv.head_dim;
  if (hd % 8 != 0) return Invalid(fmt::format("{}: head_dim {} must be a multiple of 8 (16-byte K/V rows)", kOp, hd));
  if (heads < 1 || heads % kv.kv_heads != 0) {
    return Invalid(fmt::format("{}: heads {} must be a positive multiple of kv_heads {}", kOp, heads, kv.kv_heads));
  }
  if (q == nullptr || gate == nullptr || out == nullptr) return Invalid(fmt::format("{}: q, gate and out must be set", kOp));
  if (!Aligned16(q) || !Aligned16(kv.k) || !Aligned16(kv.v)) {
    return Invalid(fmt::format("{}: q and the K/V pools must be 16-byte aligned", kOp));
  }
  if (gate_head_stride < hd || gate_row_stride < (heads - 1) * gate_head_stride + hd) {
    return Invalid(fmt::format("{}: gate strides (row {}, head {}) overlap for {} heads of {}", kOp, gate_row_stride,
                               gate_head_stride, heads, hd));
  }
  if (!std::isfinite(scale)) return Invalid(fmt::format("{}: scale {} is not finite", kOp, scale));
  const int group = heads / kv.kv_heads;
  if (static_cast<int64_t>(kv.kv_heads) * ((group + 3) / 4) > 65535) {
    return Invalid(fmt::format("{}: too many heads ({} kv heads x group {})", kOp, kv.kv_heads, group));
  }
  if (batch.max_seq_tokens < 1 || batch.max_seq_tokens > batch.num_tokens) {
    return Invalid(fmt::format("{}: max_seq_tokens {} outside [1, num_tokens {}]", kOp, batch.max_seq_tokens,
                               batch.num_tokens));
  }

  // Seqs of > kPerTokenMaxTokens tokens: the flash kernel when it supports the shape, else the
  // split-K kernel's tile path. Seqs of <= kPerTokenMaxTokens (all of a decode / verify step): the
  // tensor-core decode kernel when it supports the head dim, else the split-K kernel. Which seqs are
  // short is device data: a step with one long seq has none, any other step may have some.
  const bool has_long = batch.max_seq_tokens > kPerTokenMaxTokens;
  const bool has_short = !has_long || batch.num_seqs > 1;
  bool prefill = false;
  PrefillTile tile = PrefillTile::kLarge;
  if (path != AttentionPath::kSplitK && has_long) {
    const bool supported = PrefillAttentionSupports(hd, group);
    if (path == AttentionPath::kAuto || path == AttentionPath::kDecode) {
      if (supported && PrefillAttentionFits(PrefillTile::kLarge, hd, kv.dtype)) {
        prefill = true;
      } else if (supported && PrefillAttentionFits(PrefillTile::kSmall, hd, kv.dtype)) {
        prefill = true;
        tile = PrefillTile::kSmall;
      }
    } else {
      if (!supported) {
        return Invalid(fmt::format("{}: the prefill kernel takes head_dim 64/128/256 and up to 16 query heads a kv "
                                   "head (got head_dim {}, group {})",
                                   kOp, hd, group));
      }
      if (path == AttentionPath::kPrefillSmall && hd != 256) {
        return Invalid(fmt::format("{}: the small prefill tile is built for head_dim 256 only (got {})", kOp, hd));
      }
      tile = path == AttentionPath::kPrefillSmall || !PrefillAttentionFits(PrefillTile::kLarge, hd, kv.dtype)
                 ? PrefillTile::kSmall
                 : PrefillTile::kLarge;
      if (!PrefillAttentionFits(tile, hd, kv.dtype)) {
        return Invalid(fmt::format("{}: this GPU cannot give the prefill kernel {} bytes of shared memory (head_dim {})",
                                   kOp, PrefillAttentionSmemBytes(tile, hd, kv.dtype), hd));
      }
      prefill = true;
    }
  }
  bool decode = false;
  if (path == AttentionPath::kDecode) {
    if (!DecodeAttentionSupports(hd)) {
      return Invalid(fmt::format("{}: the decode kernel takes head_dim 64/128/256 (got {})", kOp, hd));
    }
    decode = has_short;
  } else if (path != AttentionPath::kSplitK) {
    decode = has_short && DecodeAttentionSupports(hd);
  }
  const bool split_k_short = has_short && !decode, split_k_long = has_long && !prefill;
  const bool split_k = split_k_short || split_k_long;
  const int decode_splits =
      decode ? DecodeAttentionSplits(batch.num_seqs, batch.num_tokens, batch.max_seq_tokens, kv.kv_heads, group) : 1;
  if (((split_k && AttentionSplits(batch.num_tokens) > 1) || decode_splits > 1) && workspace == nullptr) {
    return Invalid(fmt::format("{}: a step of {} tokens needs a workspace of {} bytes", kOp, batch.num_tokens,
                               PagedAttentionWorkspaceBytes(batch.num_tokens, heads, hd)));
  }
  if (decode_splits > 1 && !Aligned16(workspace)) {
    return Invalid(fmt::format("{}: the workspace must be 16-byte aligned", kOp));
  }
  if (prefill) {
    RETURN_IF_ERROR(CudaStatus(LaunchPrefillAttention(tile, q, heads, scale, kv, batch, gate, gate_row_stride,
                                                      gate_head_stride, out, stream),
                               kOp));
  }
  if (split_k) {
    const SplitKSeqs seqs = split_k_short && split_k_long ? SplitKSeqs::kAll
                            : split_k_short                ? SplitKSeqs::kShortOnly
                                                           : SplitKSeqs::kLongOnly;
    RETURN_IF_ERROR(CudaStatus(LaunchPagedAttention(q, heads, scale, kv, batch, gate, gate_row_stride,
                                                    gate_head_stride, out, static_cast<float*>(workspace), seqs,
                                                    stream),
                               kOp));
  }
  if (!decode) return absl::OkStatus();
  return CudaStatus(LaunchDecodeAttention(q, heads, scale, kv, batch, gate, gate_row_stride, gate_head_stride, out,
                                          static_cast<float*>(workspace), stream),
                    kOp);
}

}  // namespace sparkserve::kernels::cuda
