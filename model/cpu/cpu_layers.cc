// Gated attention, Gated DeltaNet and SwiGLU MLP over a ragged batch (CPU fp32), FORMATS.md §1.
#include "model/cpu/cpu_layers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/status.h"

namespace sparkserve::model::cpu {
namespace {

namespace k = kernels::cpu;

const float* F(const core::Tensor& t) { return t.data<float>(); }

// With ctx.linear_inputs_f16, rounds a linear's input rows to f16 (saturating), as the CUDA backend
// feeds its tensor cores.
void RoundLinearInput(const LayerContext& ctx, float* x, int64_t n) {
  if (!ctx.linear_inputs_f16) return;
  for (int64_t i = 0; i < n; ++i) x[i] = core::F16ToF32(core::F32ToF16(std::clamp(x[i], -65504.0f, 65504.0f)));
}

// The input Linear module ctx.layer_prefix + `module` reads: x [rows, in], or with an observer
// set, what it returns for x.
inline const float* In(const LayerContext& ctx, std::string_view module, const float* x, int64_t rows, int64_t in) {
  if (ctx.observer == nullptr) [[likely]] return x;
  return ctx.observer->OnLinearInput(std::string(ctx.layer_prefix) + std::string(module), x, rows, in);
}

// x [T, d] -> out [T, d] (partial sum on this rank).
absl::Status AttentionForward(const LayerContext& ctx, const AttentionWeights& w, const k::KvPool& kv,
                              const float* x, float* out) {
  const auto& c = ctx.config;
  const int64_t T = ctx.batch.num_tokens, d = c.hidden_size, hd = c.head_dim;
  const int64_t H = ctx.shapes.heads, KV = ctx.shapes.kv_heads;
  std::vector<float> qg(T * H * 2 * hd), q(T * H * hd), gate(T * H * hd), kk(T * KV * hd), vv(T * KV * hd);
  k::Linear(In(ctx, "self_attn.q_proj", x, T, d), T, d, F(w.q_proj), H * 2 * hd, qg.data());
  k::Linear(In(ctx, "self_attn.k_proj", x, T, d), T, d, F(w.k_proj), KV * hd, kk.data());
  k::Linear(In(ctx, "self_attn.v_proj", x, T, d), T, d, F(w.v_proj), KV * hd, vv.data());
  for (int64_t t = 0; t < T; ++t) {  // per head: [q (hd) | gate (hd)]
    for (int64_t h = 0; h < H; ++h) {
      const float* src = qg.data() + (t * H + h) * 2 * hd;
      std::copy(src, src + hd, q.data() + (t * H + h) * hd);
      std::copy(src + hd, src + 2 * hd, gate.data() + (t * H + h) * hd);
    }
  }
  const float eps = static_cast<float>(c.rms_norm_eps);
  k::RmsNormZeroCentered(q.data(), F(w.q_norm), T * H, hd, eps, q.data());
  k::RmsNormZeroCentered(kk.data(), F(w.k_norm), T * KV, hd, eps, kk.data());
  k::ApplyPartialRope(q.data(), T, H, hd, c.rotary_dim(), ctx.batch.positions, c.rope.theta);
  k::ApplyPartialRope(kk.data(), T, KV, hd, c.rotary_dim(), ctx.batch.positions, c.rope.theta);
  if (ctx.observer != nullptr) [[unlikely]] {
    ctx.observer->OnKvWrite(std::string(ctx.layer_prefix) + "self_attn", kk.data(), vv.data(), T * KV * hd);
  }
  if (ctx.kv_bf16) {
    for (float* t : {kk.data(), vv.data()}) {
      for (int64_t i = 0; i < T * KV * hd; ++i) t[i] = core::Bf16ToF32(core::F32ToBf16(t[i]));
    }
  }
  RETURN_IF_ERROR(k::WriteKv(kv, kk.data(), vv.data(), ctx.batch.seqs, ctx.batch.pages));
  std::vector<float> attn(T * H * hd);
  k::PagedAttention(kv, q.data(), H, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd))),
                    ctx.batch.seqs, ctx.batch.pages, attn.data());
  k::MulSigmoid(attn.data(), gate.data(), T * H * hd);
  RoundLinearInput(ctx, attn.data(), T * H * hd);
  k::Linear(In(ctx, "self_attn.o_proj", attn.data(), T, H * hd), T, H * hd, F(w.o_proj), d, out);
  return absl::OkStatus();
}

void GdnForward(const LayerContext& ctx, const GdnWeights& w, int32_t gi, const float* x, float* out) {
  const auto& c = ctx.config;
  const auto& rs = ctx.shapes;
  const int64_t T = ctx.batch.num_tokens, d = c.hidden_size;
  const int64_t nk = rs.nk, nv = rs.nv, dk = rs.dk, dv = rs.dv, C = rs.conv_channels();
  const int64_t K = c.linear_conv_kernel_dim;
  std::vector<float> qkv(T * C), z(T * nv * dv), a(T * nv), b(T * nv);
  k::Linear(In(ctx, "linear_attn.in_proj_qkv", x, T, d), T, d, F(w.in_proj_qkv), C, qkv.data());
  k::Linear(In(ctx, "linear_attn.in_proj_z", x, T, d), T, d, F(w.in_proj_z), nv * dv, z.data());
  k::Linear(In(ctx, "linear_attn.in_proj_a", x, T, d), T, d, F(w.in_proj_a), nv, a.data());
  k::Linear(In(ctx, "linear_attn.in_proj_b", x, T, d), T, d, F(w.in_proj_b), nv, b.data());

  const size_t S = ctx.batch.seqs.size();
  std::vector<float*> windows(S), col_windows(S), states(S), col_states(S);
  bool any_columns = false;
  for (size_t s = 0; s < S; ++s) {
    const int32_t slot = ctx.batch.slots[s];
    windows[s] = ctx.state.conv(gi, slot);
    states[s] = ctx.state.recurrent(gi, slot);
    const bool keep = ctx.batch.keep_columns[s] != 0;
    any_columns |= keep;
    col_windows[s] = keep ? ctx.state.column_conv(gi, slot) : nullptr;
    col_states[s] = keep ? ctx.state.column_recurrent(gi, slot) : nullptr;
  }
  std::vector<float> mixed(T * C);
  k::CausalConv1dSilu(qkv.data(), C, C, F(w.conv1d), K, ctx.batch.seqs, windows,
                      any_columns ? std::span<float* const>(col_windows) : std::span<float* const>(),
                      mixed.data());
  // q, k: L2-normalised per head (eps 1e-6), q scaled by dk^-0.5.
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  for (int64_t t = 0; t < T; ++t) {
    k::L2NormalizeRows(mixed.data() + t * C, nk, dk, dk, 1e-6f, q_scale);
    k::L2NormalizeRows(mixed.data() + t * C + nk * dk, nk, dk, dk, 1e-6f, 1.0f);
  }
  std::vector<float> g(T * nv), beta(T * nv), core_out(T * nv * dv);
  k::GdnGates(a.data(), b.data(), F(w.a_log), F(w.dt_bias), T, nv, g.data(), beta.data());
  k::GatedDeltaRule(mixed.data(), mixed.data() + nk * dk, C, mixed.data() + 2 * nk * dk, C, g.data(),
                    beta.data(), nk, nv, dk, dv, ctx.batch.seqs, states,
                    any_columns ? std::span<float* const>(col_states) : std::span<float* const>(),
                    core_out.data());
  k::GatedRmsNorm(core_out.data(), z.data(), F(w.norm), T * nv, dv, static_cast<float>(c.rms_norm_eps),
                  core_out.data());
  RoundLinearInput(ctx, core_out.data(), T * nv * dv);
  k::Linear(In(ctx, "linear_attn.out_proj", core_out.data(), T, nv * dv), T, nv * dv, F(w.out_proj), d, out);
}

void MlpForward(const LayerContext& ctx, const MlpWeights& w, const float* x, float* out) {
  const int64_t T = ctx.batch.num_tokens, d = ctx.config.hidden_size, f = ctx.shapes.ffn;
  std::vector<float> gate(T * f), up(T * f);
  k::Linear(In(ctx, "mlp.gate_proj", x, T, d), T, d, F(w.gate_proj), f, gate.data());
  k::Linear(In(ctx, "mlp.up_proj", x, T, d), T, d, F(w.up_proj), f, up.data());
  k::SwiGlu(gate.data(), up.data(), T * f, gate.data());
  RoundLinearInput(ctx, gate.data(), T * f);
  k::Linear(In(ctx, "mlp.down_proj", gate.data(), T, f), T, f, F(w.down_proj), d, out);
}

}  // namespace

absl::Status DecoderLayerForward(const LayerContext& ctx, const LayerWeights& w, const k::KvPool* kv,
                                 int32_t gdn_index, float* residual) {
  const int64_t T = ctx.batch.num_tokens, d = ctx.config.hidden_size;
  const float eps = static_cast<float>(ctx.config.rms_norm_eps);
  std::vector<float> normed(T * d), delta(T * d);
  k::RmsNormZeroCentered(residual, F(w.input_layernorm), T, d, eps, normed.data());
  RoundLinearInput(ctx, normed.data(), T * d);
  if (w.type == LayerType::kFullAttention) {
    RETURN_IF_ERROR(AttentionForward(ctx, w.attn, *kv, normed.data(), delta.data()));
  } else {
    GdnForward(ctx, w.gdn, gdn_index, normed.data(), delta.data());
  }
  RETURN_IF_ERROR(ctx.collective.AllReduceSum(delta));
  k::AddRmsNormZeroCentered(residual, delta.data(), F(w.post_attention_layernorm), T, d, eps, normed.data());
  RoundLinearInput(ctx, normed.data(), T * d);
  MlpForward(ctx, w.mlp, normed.data(), delta.data());
  RETURN_IF_ERROR(ctx.collective.AllReduceSum(delta));
  k::AddInPlace(residual, delta.data(), T * d);
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cpu
