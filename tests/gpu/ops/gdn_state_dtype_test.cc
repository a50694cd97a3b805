// GPU Gated DeltaNet with a bf16 state (kernels/cuda/gdn.h GdnStateDtype::kBf16) against the CPU chain
// of gdn_reference.h started from the same bf16 values: every kernel (decode in both layouts,
// sequential, chunked large / small / f32-emulated, auto) on the 4B's shape and small odd ones, fresh
// and carried seqs. The step's outputs must match as tightly as with an f32 state (the kernels widen
// the state and run in f32); the stored state must be the f32 result rounded to bf16 (within one bf16
// step); spare slots keep their bits; column states with a bf16 state are refused.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/gdn_kernels.h"
#include "tests/gpu/ops/gdn_reference.h"
#include "tests/gpu/ops/gdn_test_util.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::gdn {
namespace {

using cuda::GdnKernel;

constexpr cuda::GdnShape k4B{16, 32, 128, 128};

// Round-to-nearest-even f32 -> bf16 bits, as __float2bfloat16_rn (NaN stays a NaN).
uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__nv_bfloat16 Bf16(uint16_t bits) {
  __nv_bfloat16_raw r;
  r.x = bits;
  return __nv_bfloat16(r);
}
uint16_t Bits(__nv_bfloat16 h) { return static_cast<__nv_bfloat16_raw>(h).x; }
float Bf16Value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// One call of `kernel` (kDecode with a forced layout when `layout` is not kAuto) on a bf16 state,
// against the CPU from the same (bf16-exact) initial state.
void CheckBf16State(const GdnCase& gc, uint32_t seed, GdnKernel kernel, double out_tol,
                    cuda::GdnDecodeLayout layout = cuda::GdnDecodeLayout::kAuto) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  SCOPED_TRACE(fmt::format("nk {} nv {} dk {} dv {}, {} seqs, kernel {}, layout {}", gc.shape.nk, gc.shape.nv,
                           gc.shape.dk, gc.shape.dv, gc.seqs.size(), static_cast<int>(kernel),
                           static_cast<int>(layout)));
  std::mt19937 rng(seed);
  const StepBatch batch = MakeBatch(gc.seqs);
  GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  std::vector<uint16_t> bits(in.state.size());
  std::vector<__nv_bfloat16> initial(in.state.size());
  for (size_t i = 0; i < in.state.size(); ++i) {
    bits[i] = Bf16Bits(in.state[i]);
    initial[i] = Bf16(bits[i]);
    in.state[i] = Bf16Value(bits[i]);  // the CPU starts from exactly what the GPU widens
  }
  const GdnReference ref = CpuGdn(gc, batch, in);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  DeviceBuffer<__nv_bfloat16> state = ToDevice(initial);
  const size_t ws_bytes = cuda::GdnWorkspaceBytes(gc.shape, batch.num_tokens, static_cast<int>(gc.seqs.size()));
  DeviceBuffer<uint8_t> ws = ToDevice(std::vector<uint8_t>(std::max<size_t>(ws_bytes, 16), 0xff));
  if (layout != cuda::GdnDecodeLayout::kAuto) {
    ASSERT_EQ(cuda::LaunchGatedDeltaNetDecode(d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(),
                                              1e-6f, batch.device, layout, state.data(), d.out.data(), nullptr),
              cudaSuccess);
  } else {
    GPU_ASSERT_OK(cuda::GatedDeltaNetWith(kernel, d.input, gc.shape, d.a_log.data(), d.dt_bias.data(),
                                          d.norm_w.data(), 1e-6f, batch.device, state.data(), nullptr, 0, d.out.data(),
                                          nullptr, {ws_bytes > 0 ? ws.data() : nullptr, ws_bytes}));
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  EXPECT_CLOSE(HalfToFloat(ToHost(d.out)), ref.out, out_tol, "gdn out (f16) from a bf16 state");
  std::vector<uint16_t> got_bits;
  for (const __nv_bfloat16 h : ToHost(state)) got_bits.push_back(Bits(h));
  const auto [nk, nv, dk, dv] = gc.shape;
  const size_t slot_state = static_cast<size_t>(nv) * dk * dv;
  std::vector<bool> used(static_cast<size_t>(gc.num_slots), false);
  for (size_t s = 0; s < gc.seqs.size(); ++s) {
    const SeqSpec& sp = gc.seqs[s];
    used[static_cast<size_t>(sp.slot)] = true;
    double largest = 0;
    for (const float v : ref.states[s]) largest = std::max(largest, std::abs(static_cast<double>(v)));
    // One bf16 step of the element (2^-7 relative covers rounding either way of the f32 result)
    // plus the f32 path's own tolerance relative to the largest element.
    int bad = 0;
    size_t first_bad = 0;
    for (size_t i = 0; i < slot_state; ++i) {
      const double got = Bf16Value(got_bits[sp.slot * slot_state + i]), want = ref.states[s][i];
      if (!(std::abs(got - want) <= std::abs(want) * 0x1p-7 + 1e-4 * largest)) {
        if (bad++ == 0) first_bad = i;
      }
    }
    EXPECT_EQ(bad, 0) << "bf16 state of seq " << s << " (slot " << sp.slot << "): " << bad
                      << " elements off; first at " << first_bad << ": got "
                      << Bf16Value(got_bits[sp.slot * slot_state + first_bad])
                      << " want " << ref.states[s][first_bad];
  }
  for (int slot = 0; slot < gc.num_slots; ++slot) {
    if (used[static_cast<size_t>(slot)]) continue;
    EXPECT_TRUE(std::equal(got_bits.begin() + slot * slot_state, got_bits.begin() + (slot + 1) * slot_state,
                           bits.begin() + slot * slot_state))
        << "bf16 state of unused slot " << slot << " changed";
  }
}

// Decode steps: 1-token seqs in reversed slots, seq 1 fresh, slots 0 and 1 spare.
GdnCase DecodeStep(const cuda::GdnShape& shape, int seqs) {
  GdnCase gc{shape, seqs + 2, 1, 0, 0, {}};
  for (int s = 0; s < seqs; ++s) gc.seqs.push_back({1, s == 1 ? 0 : 5 + 31 * s, seqs + 1 - s, false});
  return gc;
}

// Prefill steps: long (chunked) and short (sequential under kAuto) seqs, carried and fresh.
GdnCase PrefillStep(const cuda::GdnShape& shape) {
  return GdnCase{shape, 5, 1, 0, 0, {{150, 64, 3, false}, {70, 0, 0, false}, {9, 200, 4, false}, {1, 33, 1, false}}};
}

TEST(GatedDeltaNetBf16StateTest, DecodeBothLayouts4B) {
  for (const int seqs : {3, 8}) {  // kAuto picks split columns at 3 (96 heads), whole heads at 8
    const GdnCase gc = DecodeStep(k4B, seqs);
    CheckBf16State(gc, 401 + seqs, GdnKernel::kDecode, 3e-3);
    CheckBf16State(gc, 402 + seqs, GdnKernel::kDecode, 3e-3, cuda::GdnDecodeLayout::kWholeHead);
    CheckBf16State(gc, 403 + seqs, GdnKernel::kDecode, 3e-3, cuda::GdnDecodeLayout::kSplitColumns);
  }
}

TEST(GatedDeltaNetBf16StateTest, DecodeSmallOddShapes) {
  for (const cuda::GdnShape shape : {cuda::GdnShape{2, 4, 16, 24}, cuda::GdnShape{1, 3, 24, 40}}) {
    const GdnCase gc = DecodeStep(shape, 5);
    CheckBf16State(gc, 411, GdnKernel::kDecode, 3e-3, cuda::GdnDecodeLayout::kWholeHead);
    CheckBf16State(gc, 412, GdnKernel::kDecode, 3e-3, cuda::GdnDecodeLayout::kSplitColumns);
  }
}

TEST(GatedDeltaNetBf16StateTest, PrefillEveryKernel4B) {
  const GdnCase gc = PrefillStep(k4B);
  CheckBf16State(gc, 421, GdnKernel::kAuto, 5e-3);
  CheckBf16State(gc, 422, GdnKernel::kSequential, 3e-3);
  CheckBf16State(gc, 423, GdnKernel::kChunked, 5e-3);
  CheckBf16State(gc, 424, GdnKernel::kChunkedSmall, 5e-3);
  CheckBf16State(gc, 425, GdnKernel::kChunkedSimt, 5e-3);
}

TEST(GatedDeltaNetBf16StateTest, PrefillSmallOddShape) {
  const GdnCase gc = PrefillStep(cuda::GdnShape{2, 4, 16, 24});
  CheckBf16State(gc, 431, GdnKernel::kAuto, 5e-3);
  CheckBf16State(gc, 432, GdnKernel::kSequential, 3e-3);
  CheckBf16State(gc, 433, GdnKernel::kChunked, 5e-3);
}

TEST(GatedDeltaNetBf16StateTest, RejectsColumnStates) {
  ASSERT_TRUE(HasCudaDevice());
  const GdnCase gc{cuda::GdnShape{2, 4, 16, 24}, 2, 2, 0, 0, {{2, 5, 0, true}}};
  std::mt19937 rng(441);
  const StepBatch batch = MakeBatch(gc.seqs);
  const GdnInputs in = MakeGdnInputs(gc, batch.num_tokens, rng);
  GdnDevice d = UploadGdn(gc, in, batch.num_tokens);
  DeviceBuffer<__nv_bfloat16> state = ToDevice(std::vector<__nv_bfloat16>(in.state.size(), Bf16(0)));
  const absl::Status st =
      cuda::GatedDeltaNet(d.input, gc.shape, d.a_log.data(), d.dt_bias.data(), d.norm_w.data(), 1e-6f, batch.device,
                          state.data(), d.columns.data(), gc.max_columns, d.out.data(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(std::string(st.message()).find("f32 state"), std::string::npos) << st;
}

}  // namespace
}  // namespace sparkserve::gpu_test::gdn
