// The Gated DeltaNet op tests' reference machinery (gdn_test.cc, gdn_prefill_test.cc): one call's
// inputs (seeded random, fresh slots NaN-poisoned), the CPU chain of model/cpu_layers.cc GdnForward
// (norm.cc L2NormalizeRows + GatedRmsNorm, activation.cc GdnGates, gated_delta.cc), the device
// buffers (outputs poisoned) and the comparison of out / final states / columns / untouched slots.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/gdn.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {

struct GdnCase {
  cuda::GdnShape shape;
  int num_slots = 0, max_columns = 1, mixed_pad = 0, z_pad = 0;
  std::vector<SeqSpec> seqs;
};

// The inputs of one GatedDeltaNet call (host), laid out as the kernel reads them.
struct GdnInputs {
  int mixed_stride = 0, ab_stride = 0, z_stride = 0;
  std::vector<float> mixed, ab, z, a_log, dt_bias, norm_w, state;
};

inline GdnInputs MakeGdnInputs(const GdnCase& gc, int T, std::mt19937& rng) {
  const auto [nk, nv, dk, dv] = gc.shape;
  GdnInputs in;
  in.mixed_stride = 2 * nk * dk + nv * dv + gc.mixed_pad;
  in.ab_stride = 2 * nv;  // a and b side by side in one row, as one projection would give them
  in.z_stride = nv * dv + gc.z_pad;
  in.mixed = RandomF32(static_cast<size_t>(T) * in.mixed_stride, rng);
  in.ab = RandomF32(static_cast<size_t>(T) * in.ab_stride, rng);
  in.z = RandomF32(static_cast<size_t>(T) * in.z_stride, rng);
  in.a_log = RandomF32(nv, rng, 0.5f);
  in.dt_bias = RandomF32(nv, rng, 0.5f);
  in.norm_w = RandomF32(dv, rng, 0.1f);
  for (float& v : in.norm_w) v += 1.0f;
  const size_t slot_state = static_cast<size_t>(nv) * dk * dv;
  in.state = RandomF32(gc.num_slots * slot_state, rng, 0.3f);
  for (const SeqSpec& sp : gc.seqs) {  // a fresh seq's slot must not be read
    if (sp.start_pos == 0) std::fill_n(in.state.begin() + sp.slot * slot_state, slot_state, kNaN);
  }
  return in;
}

// What the CPU chain of GdnForward produces: out [T, nv * dv], final states and columns per seq.
struct GdnReference {
  std::vector<float> out;
  std::vector<std::vector<float>> states, columns;
};

inline GdnReference CpuGdn(const GdnCase& gc, const StepBatch& batch, const GdnInputs& in) {
  const auto [nk, nv, dk, dv] = gc.shape;
  const int T = batch.num_tokens;
  const float eps = 1e-6f;
  std::vector<float> work = in.mixed;
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  for (int t = 0; t < T; ++t) {
    cpu::L2NormalizeRows(work.data() + static_cast<size_t>(t) * in.mixed_stride, nk, dk, dk, 1e-6f, q_scale);
    cpu::L2NormalizeRows(work.data() + static_cast<size_t>(t) * in.mixed_stride + nk * dk, nk, dk, dk, 1e-6f, 1.0f);
  }
  std::vector<float> a(static_cast<size_t>(T) * nv), b(a.size()), g(a.size()), beta(a.size());
  std::vector<float> z(static_cast<size_t>(T) * nv * dv);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < nv; ++j) {
      a[t * nv + j] = in.ab[static_cast<size_t>(t) * in.ab_stride + j];
      b[t * nv + j] = in.ab[static_cast<size_t>(t) * in.ab_stride + nv + j];
    }
    std::copy_n(in.z.begin() + static_cast<std::ptrdiff_t>(t) * in.z_stride, nv * dv,
                z.begin() + static_cast<std::ptrdiff_t>(t) * nv * dv);
  }
  cpu::GdnGates(a.data(), b.data(), in.a_log.data(), in.dt_bias.data(), T, nv, g.data(), beta.data());

  const size_t S = gc.seqs.size(), slot_state = static_cast<size_t>(nv) * dk * dv;
  GdnReference ref;
  ref.states.resize(S);
  ref.columns.resize(S);
  std::vector<float*> state_ptrs(S), col_ptrs(S);
  for (size_t s = 0; s < S; ++s) {
    const SeqSpec& sp = gc.seqs[s];
    ref.states[s] =
        sp.start_pos == 0 ? std::vector<float>(slot_state, 0.0f) : Slice(in.state, sp.slot * slot_state, slot_state);
    if (sp.keep) ref.columns[s].assign(sp.tokens * slot_state, 0.0f);
    state_ptrs[s] = ref.states[s].data();
    col_ptrs[s] = sp.keep ? ref.columns[s].data() : nullptr;
  }
  ref.out.assign(static_cast<size_t>(T) * nv * dv, 0.0f);
  cpu::GatedDeltaRule(work.data(), work.data() + nk * dk, in.mixed_stride, work.data() + 2 * nk * dk,
                      in.mixed_stride, g.data(), beta.data(), nk, nv, dk, dv, batch.seqs, state_ptrs,
                      AnyKeep(gc.seqs) ? std::span<float* const>(col_ptrs) : std::span<float* const>(),
                      ref.out.data());
  cpu::GatedRmsNorm(ref.out.data(), z.data(), in.norm_w.data(), static_cast<int64_t>(T) * nv, dv, eps,
                    ref.out.data());
  return ref;
}

// The device side of one call: every buffer, outputs poisoned.
struct GdnDevice {
  DeviceBuffer<float> mixed, ab, z, a_log, dt_bias, norm_w, state, columns;
  DeviceBuffer<__half> out;
  cuda::GdnInput input;
};

inline DeviceBuffer<__half> PoisonedF16(size_t count) {
  __half_raw nan;
  nan.x = 0x7e00;
  return ToDevice(std::vector<__half>(count, __half(nan)));
}

inline GdnDevice UploadGdn(const GdnCase& gc, const GdnInputs& in, int T) {
  const auto [nk, nv, dk, dv] = gc.shape;
  GdnDevice d;
  d.mixed = ToDevice(in.mixed);
  d.ab = ToDevice(in.ab);
  d.z = ToDevice(in.z);
  d.a_log = ToDevice(in.a_log);
  d.dt_bias = ToDevice(in.dt_bias);
  d.norm_w = ToDevice(in.norm_w);
  d.state = ToDevice(in.state);
  d.columns = PoisonedF32(static_cast<size_t>(gc.num_slots) * gc.max_columns * nv * dk * dv);
  d.out = PoisonedF16(static_cast<size_t>(T) * nv * dv);
  d.input = {d.mixed.data(), in.mixed_stride, d.ab.data(), d.ab.data() + nv, in.ab_stride, d.z.data(), in.z_stride};
  return d;
}

// kernel kAuto is GatedDeltaNet itself. The column buffer is passed when a seq keeps columns (MTP
// verify, which the sequential kernel serves) or the sequential kernel is forced; otherwise null, as
// the model runner passes it for prefill (so long seqs reach the chunked kernel).
inline absl::Status RunGdn(const GdnCase& gc, const StepBatch& batch, GdnDevice& d, cudaStream_t stream,
                           cuda::GdnKernel kernel = cuda::GdnKernel::kAuto) {
  const bool columns = AnyKeep(gc.seqs) || kernel == cuda::GdnKernel::kSequential;
  return cuda::GatedDeltaNetWith(kernel, d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f,
                                 batch.device, d.state.data(), columns ? d.columns.data() : nullptr, gc.max_columns,
                                 d.out.data(), stream);
}

inline std::vector<float> HalfToFloat(const std::vector<__half>& h) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

// Compares the GPU's out / state / columns with the CPU reference, and that nothing outside the
// step's slots and columns changed. Tolerances: relative to the largest reference value.
inline void CompareGdn(const GdnCase& gc, const GdnInputs& in, const GdnReference& ref, const GdnDevice& d,
                       double out_tol = 3e-3, double state_tol = 1e-4) {
  const auto [nk, nv, dk, dv] = gc.shape;
  const size_t slot_state = static_cast<size_t>(nv) * dk * dv, slot_columns = gc.max_columns * slot_state;
  const std::vector<float> out = HalfToFloat(ToHost(d.out));
  const std::vector<float> state = ToHost(d.state), columns = ToHost(d.columns);
  EXPECT_CLOSE(out, ref.out, out_tol, "gdn out (f16)");
  std::vector<bool> used(gc.num_slots, false);
  for (size_t s = 0; s < gc.seqs.size(); ++s) {
    const SeqSpec& sp = gc.seqs[s];
    used[sp.slot] = true;
    EXPECT_CLOSE(Slice(state, sp.slot * slot_state, slot_state), ref.states[s], state_tol,
                 fmt::format("final state of seq {}", s));
    const size_t base = sp.slot * slot_columns;
    const int kept = sp.keep ? std::min(sp.tokens, gc.max_columns) : 0;
    for (int i = 0; i < kept; ++i) {
      EXPECT_CLOSE(Slice(columns, base + i * slot_state, slot_state), Slice(ref.columns[s], i * slot_state, slot_state),
                   1e-4, fmt::format("column {} of seq {}", i, s));
    }
    EXPECT_EQ(CountNotNaN(columns, base + kept * slot_state, slot_columns - kept * slot_state), 0)
        << "columns written past the seq's kept tokens (or without keep_columns), seq " << s;
  }
  for (int slot = 0; slot < gc.num_slots; ++slot) {
    if (used[slot]) continue;
    EXPECT_EQ(CountDiffering(state, slot * slot_state, in.state, slot * slot_state, slot_state), 0)
        << "state of unused slot " << slot;
    EXPECT_EQ(CountNotNaN(columns, slot * slot_columns, slot_columns), 0) << "columns of unused slot " << slot;
  }
}

}  // namespace sparkserve::gpu_test::gdn
