// GPU row-wise ops (kernels/cuda/norm_ops.h) against the CPU reference (kernels/cpu/ops.h) on fresh
// random inputs, outputs poisoned with NaN first: the 4B's shapes (hidden 2560, MLP 9216, head 256),
// tiny/odd dims that take the scalar paths, offset pointers that defeat the vector loads.
#include "kernels/cuda/norm_ops.h"

#include <cstring>
#include <iterator>
#include <limits>

#include "core/half.h"
#include "kernels/cpu/ops.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

constexpr float kEps = 1e-6f;
constexpr double kF32Tol = 1e-5;  // fp32 math, different reduction order / rsqrt approximation
constexpr double kF16Tol = 2e-3;  // one f16 step (<= 2^-10 of the largest value) where roundings differ

std::vector<float> Widen16(const std::vector<uint16_t>& h, bool bf16) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = bf16 ? core::Bf16ToF32(h[i]) : core::F16ToF32(h[i]);
  return f;
}
// The f16 a saturating conversion gives, widened back (the reference for f16 outputs).
float RoundF16Saturated(float v) {
  const float s = v > 65504.f ? 65504.f : (v < -65504.f ? -65504.f : v);
  return core::F16ToF32(core::F32ToF16(s));
}
std::vector<float> RoundF16Saturated(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = RoundF16Saturated(v[i]);
  return r;
}
DeviceBuffer<uint16_t> PoisonedF16(size_t count) { return ToDevice(std::vector<uint16_t>(count, 0x7e00)); }
__half* AsHalf(DeviceBuffer<uint16_t>& b, size_t offset = 0) { return reinterpret_cast<__half*>(b.data() + offset); }
std::vector<float> Slice(const std::vector<float>& v, size_t begin, size_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(begin + count)};
}
std::string Name(const char* what, int rows, int dim, int offset = 0) {
  return std::string(what) + " rows " + std::to_string(rows) + " dim " + std::to_string(dim) + " offset " +
         std::to_string(offset);
}

// rows x dim; offset shifts every device pointer by that many elements (0: vector path where dim
// allows; 1: scalar path).
struct NormCase {
  int rows, dim, offset;
};
// 4B hidden (decode and prefill-ish), the widest rows, head_dim 256 of q/k norms (many rows, warp
// mode), the golden fixtures' tiny dims, odd dims (scalar paths) and the warp/block boundary.
constexpr NormCase kNormCases[] = {{1, 2560, 0},  {7, 2560, 0},  {3, 8192, 0},  {2, 16384, 0}, {300, 256, 0},
                                   {5, 16, 0},    {9, 24, 0},    {4, 64, 0},    {33, 512, 0},  {2, 516, 0},
                                   {3, 13, 0},    {2, 2562, 0},  {1, 16383, 0}, {4, 2560, 1},  {6, 64, 1},
                                   {1, 1, 0},     {65, 100, 0}};

TEST(NormOpsTest, RmsNormZeroCenteredMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  for (const NormCase& c : kNormCases) {
    std::mt19937 rng(1000 + c.rows * 31 + c.dim);
    const size_t count = static_cast<size_t>(c.rows) * c.dim;
    std::vector<float> x = RandomF32(count + c.offset, rng, 3.0f);
    const std::vector<float> w = RandomF32(c.dim + c.offset, rng, 0.1f);
    std::vector<float> want(count);
    cpu::RmsNormZeroCentered(x.data() + c.offset, w.data() + c.offset, c.rows, c.dim, kEps, want.data());

    DeviceBuffer<float> dx = ToDevice(x), dw = ToDevice(w), out = PoisonedF32(count + c.offset);
    DeviceBuffer<uint16_t> out16 = PoisonedF16(count + c.offset);
    GPU_ASSERT_OK(kc::RmsNormZeroCentered(dx.data() + c.offset, dw.data() + c.offset, c.rows, c.dim, kEps,
                                          out.data() + c.offset, AsHalf(out16, c.offset), nullptr));
    EXPECT_CLOSE(Slice(ToHost(out), c.offset, count), want, kF32Tol, Name("rmsnorm f32", c.rows, c.dim, c.offset));
    EXPECT_CLOSE(Slice(Widen16(ToHost(out16), false), c.offset, count), RoundF16Saturated(want), kF16Tol,
                 Name("rmsnorm f16", c.rows, c.dim, c.offset));

    // In place (out_f32 == x), f32 only.
    GPU_ASSERT_OK(kc::RmsNormZeroCentered(dx.data() + c.offset, dw.data() + c.offset, c.rows, c.dim, kEps,
                                          dx.data() + c.offset, nullptr, nullptr));
    EXPECT_CLOSE(Slice(ToHost(dx), c.offset, count), want, kF32Tol, Name("rmsnorm in place", c.rows, c.dim, c.offset));
  }
}

TEST(NormOpsTest, RmsNormF16OnlyLeavesNoGaps) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(7);
  const int rows = 3, dim = 2560;
  const std::vector<float> x = RandomF32(static_cast<size_t>(rows) * dim, rng), w = RandomF32(dim, rng, 0.1f);
  std::vector<float> want(x.size());
  cpu::RmsNormZeroCentered(x.data(), w.data(), rows, dim, kEps, want.data());
  DeviceBuffer<float> dx = ToDevice(x), dw = ToDevice(w);
  DeviceBuffer<uint16_t> out16 = PoisonedF16(x.size());
  GPU_ASSERT_OK(kc::RmsNormZeroCentered(dx.data(), dw.data(), rows, dim, kEps, nullptr, AsHalf(out16), nullptr));
  EXPECT_CLOSE(Widen16(ToHost(out16), false), RoundF16Saturated(want), kF16Tol, "rmsnorm f16 only");
  EXPECT_EQ(ToHost(dx), x) << "the input must be left alone";
}

TEST(NormOpsTest, AddRmsNormZeroCenteredMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice());
  for (const NormCase& c : kNormCases) {
    std::mt19937 rng(2000 + c.rows * 31 + c.dim);
    const size_t count = static_cast<size_t>(c.rows) * c.dim;
    const std::vector<float> residual = RandomF32(count + c.offset, rng, 2.0f);
    const std::vector<float> delta = RandomF32(count + c.offset, rng, 1.0f);
    const std::vector<float> w = RandomF32(c.dim + c.offset, rng, 0.1f);
    std::vector<float> want_residual = Slice(residual, c.offset, count), want(count);
    cpu::AddRmsNormZeroCentered(want_residual.data(), delta.data() + c.offset, w.data() + c.offset, c.rows, c.dim,
                                kEps, want.data());

    DeviceBuffer<float> dres = ToDevice(residual), ddelta = ToDevice(delta), dw = ToDevice(w);
    DeviceBuffer<float> out = PoisonedF32(count + c.offset);
    DeviceBuffer<uint16_t> out16 = PoisonedF16(count + c.offset);
    GPU_ASSERT_OK(kc::AddRmsNormZeroCentered(dres.data() + c.offset, ddelta.data() + c.offset, dw.data() + c.offset,
                                             c.rows, c.dim, kEps, out.data() + c.offset, AsHalf(out16, c.offset),
                                             nullptr));
    // The add is one fp32 add per element on both sides: exact.
    EXPECT_CLOSE(Slice(ToHost(dres), c.offset, count), want_residual, 0.0, Name("add residual", c.rows, c.dim, c.offset));
    EXPECT_CLOSE(Slice(ToHost(out), c.offset, count), want, kF32Tol, Name("add+norm f32", c.rows, c.dim, c.offset));
    EXPECT_CLOSE(Slice(Widen16(ToHost(out16), false), c.offset, count), RoundF16Saturated(want), kF16Tol,
                 Name("add+norm f16", c.rows, c.dim, c.offset));
  }
}

TEST(NormOpsTest, NormRejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  DeviceBuffer<float> x = PoisonedF32(64), w = PoisonedF32(64), out = PoisonedF32(64);
  auto bad = [](const absl::Status& s) { return s.code() == absl::StatusCode::kInvalidArgument; };
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(x.data(), w.data(), 1, 0, kEps, out.data(), nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(x.data(), w.data(), 1, 16385, kEps, out.data(), nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(x.data(), w.data(), -1, 64, kEps, out.data(), nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(x.data(), w.data(), 1, 64, -1.f, out.data(), nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(x.data(), w.data(), 1, 64, kEps, nullptr, nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::RmsNormZeroCentered(nullptr, w.data(), 1, 64, kEps, out.data(), nullptr, nullptr)));
  EXPECT_TRUE(bad(kc::AddRmsNormZeroCentered(x.data(), nullptr, w.data(), 1, 64, kEps, out.data(), nullptr, nullptr)));
  const absl::Status s = kc::RmsNormZeroCentered(x.data(), w.data(), 1, 20000, kEps, out.data(), nullptr, nullptr);
  EXPECT_NE(std::string(s.message()).find("20000"), std::string::npos) << s.message();
  // Zero rows is a no-op, not an error.
  GPU_ASSERT_OK(kc::RmsNormZeroCentered(x.data(), w.data(), 0, 64, kEps, out.data(), nullptr, nullptr));
}

TEST(NormOpsTest, EmbeddingGatherMatchesCpuAndZeroesBadIds) {
  ASSERT_TRUE(HasCudaDevice());
  const int64_t vocab = 1000;
  struct Case {
    int dim, offset;
  };
  for (const Case c : {Case{2560, 0}, Case{64, 0}, Case{24, 0}, Case{16, 0}, Case{13, 0}, Case{64, 1}}) {
    std::mt19937 rng(3000 + c.dim + c.offset);
    const size_t table_count = static_cast<size_t>(vocab) * c.dim;
    std::vector<uint16_t> table(table_count + c.offset);
    const std::vector<float> values = RandomF32(table.size(), rng);
    for (size_t i = 0; i < table.size(); ++i) table[i] = core::F32ToBf16(values[i]);
    const std::vector<float> table_f32 = Slice(Widen16(table, true), c.offset, table_count);

    std::vector<int32_t> ids = {0, static_cast<int32_t>(vocab - 1), -1, static_cast<int32_t>(vocab), 5, 5};
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
    for (int i = 0; i < 31; ++i) ids.push_back(pick(rng));
    std::vector<float> want(ids.size() * c.dim, 0.f);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) continue;  // the GPU writes a zero row
      GPU_ASSERT_OK(cpu::EmbeddingGather(table_f32.data(), vocab, c.dim, std::span<const int32_t>(&ids[i], 1),
                                         want.data() + i * c.dim));
    }
    DeviceBuffer<uint16_t> dtable = ToDevice(table);
    DeviceBuffer<int32_t> dids = ToDevice(ids);
    DeviceBuffer<float> out = PoisonedF32(want.size() + c.offset);
    GPU_ASSERT_OK(kc::EmbeddingGather(reinterpret_cast<const __nv_bfloat16*>(dtable.data() + c.offset), vocab, c.dim,
                                      dids.data(), static_cast<int>(ids.size()), out.data() + c.offset, nullptr));
    EXPECT_CLOSE(Slice(ToHost(out), c.offset, want.size()), want, 0.0, Name("embedding", 0, c.dim, c.offset));
  }
}

TEST(NormOpsTest, GatherRowsCopiesRows) {
  ASSERT_TRUE(HasCudaDevice());
  for (const int dim : {2560, 24, 13, 1}) {
    std::mt19937 rng(4000 + dim);
    const int src_rows = 50;
    const std::vector<float> x = RandomF32(static_cast<size_t>(src_rows) * dim, rng);
    std::uniform_int_distribution<int32_t> pick(0, src_rows - 1);
    std::vector<int32_t> idx = {src_rows - 1, 0, 0};
    for (int i = 0; i < 20; ++i) idx.push_back(pick(rng));
    std::vector<float> want(idx.size() * dim);
    for (size_t i = 0; i < idx.size(); ++i) {
      std::memcpy(want.data() + i * dim, x.data() + static_cast<size_t>(idx[i]) * dim, sizeof(float) * dim);
    }
    DeviceBuffer<float> dx = ToDevice(x), out = PoisonedF32(want.size());
    DeviceBuffer<int32_t> didx = ToDevice(idx);
    GPU_ASSERT_OK(kc::GatherRows(dx.data(), dim, didx.data(), static_cast<int>(idx.size()), out.data(), nullptr));
    EXPECT_CLOSE(ToHost(out), want, 0.0, Name("gather rows", static_cast<int>(idx.size()), dim));
  }
}

TEST(NormOpsTest, SwiGluMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice());
  struct Case {
    int rows, cols, ld;
  };
  // Gate and up as the two halves of a fused gate_up output (ld = 2 * cols, up = gate + cols), and
  // with a gap (ld > 2 * cols); cols 13 leaves up misaligned (scalar path).
  for (const Case c : {Case{1, 9216, 18432}, Case{5, 9216, 18432}, Case{3, 96, 192}, Case{2, 24, 52}, Case{4, 13, 26},
                       Case{1, 1, 2}, Case{70, 100, 200}}) {
    std::mt19937 rng(5000 + c.rows * 7 + c.cols);
    const std::vector<float> buf = RandomF32(static_cast<size_t>(c.rows) * c.ld, rng, 4.0f);
    std::vector<float> gate, up, want(static_cast<size_t>(c.rows) * c.cols);
    for (int r = 0; r < c.rows; ++r) {
      const float* row = buf.data() + static_cast<size_t>(r) * c.ld;
      gate.insert(gate.end(), row, row + c.cols);
      up.insert(up.end(), row + c.cols, row + 2 * c.cols);
    }
    cpu::SwiGlu(gate.data(), up.data(), static_cast<int64_t>(want.size()), want.data());
    DeviceBuffer<float> dbuf = ToDevice(buf);
    DeviceBuffer<uint16_t> out = PoisonedF16(want.size());
    GPU_ASSERT_OK(kc::SwiGlu(dbuf.data(), dbuf.data() + c.cols, c.rows, c.cols, c.ld, AsHalf(out), nullptr));
    EXPECT_CLOSE(Widen16(ToHost(out), false), RoundF16Saturated(want), kF16Tol, Name("swiglu", c.rows, c.cols));
  }
}

TEST(NormOpsTest, SwiGluSaturatesAndRejectsBadLd) {
  ASSERT_TRUE(HasCudaDevice());
  // silu(20) * 1e4 ~ 2e5 and its negative: beyond f16, saturated to +-65504.
  const std::vector<float> gate = {20.f, 20.f, 0.5f, -3.f}, up = {1e4f, -1e4f, 2.f, 1.f};
  DeviceBuffer<float> dg = ToDevice(gate), du = ToDevice(up);
  DeviceBuffer<uint16_t> out = PoisonedF16(4);
  GPU_ASSERT_OK(kc::SwiGlu(dg.data(), du.data(), 1, 4, 4, AsHalf(out), nullptr));
  const std::vector<float> got = Widen16(ToHost(out), false);
  EXPECT_EQ(got[0], 65504.f);
  EXPECT_EQ(got[1], -65504.f);
  EXPECT_NEAR(got[2], RoundF16Saturated(cpu::Silu(0.5f) * 2.f), 1e-3);
  EXPECT_NEAR(got[3], RoundF16Saturated(cpu::Silu(-3.f)), 1e-3);
  EXPECT_EQ(kc::SwiGlu(dg.data(), du.data(), 1, 4, 3, AsHalf(out), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NormOpsTest, F32ToF16RoundsToNearestAndSaturates) {
  ASSERT_TRUE(HasCudaDevice());
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{1000}, int64_t{1000003}}) {
    for (const int offset : {0, 1}) {
      std::mt19937 rng(6000 + static_cast<int>(n) + offset);
      std::vector<float> x = RandomF32(static_cast<size_t>(n + offset), rng, 100.f);
      const float specials[] = {1e5f, -1e6f, inf, -inf, 65519.f, 65520.f, 3e-6f, -1e-7f, 0.f, 1.f / 3.f};
      for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i) < n; ++i) x[offset + i * 97 % n] = specials[i];
      DeviceBuffer<float> dx = ToDevice(x);
      DeviceBuffer<uint16_t> out = PoisonedF16(static_cast<size_t>(n + offset));
      GPU_ASSERT_OK(kc::F32ToF16(dx.data() + offset, n, AsHalf(out, offset), nullptr));
      const std::vector<uint16_t> got = ToHost(out);
      int64_t mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[offset + i];
        const uint16_t want = core::F32ToF16(v > 65504.f ? 65504.f : (v < -65504.f ? -65504.f : v));
        if (got[offset + i] != want && mismatches++ < 5) {
          ADD_FAILURE() << "n " << n << " offset " << offset << " element " << i << ": " << v << " -> 0x" << std::hex
                        << got[offset + i] << ", want 0x" << want;
        }
      }
      EXPECT_EQ(mismatches, 0) << "n " << n << " offset " << offset;
    }
  }
  // NaN stays NaN (saturation must not turn it into a finite value).
  DeviceBuffer<float> nan = ToDevice(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
  DeviceBuffer<uint16_t> out = ToDevice(std::vector<uint16_t>{0});
  GPU_ASSERT_OK(kc::F32ToF16(nan.data(), 1, AsHalf(out), nullptr));
  const uint16_t h = ToHost(out)[0];
  EXPECT_TRUE((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) << "NaN became 0x" << std::hex << h;
}

TEST(NormOpsTest, AddInPlaceMatchesCpu) {
  ASSERT_TRUE(HasCudaDevice());
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{2560}, int64_t{1000003}}) {
    for (const int offset : {0, 1}) {
      std::mt19937 rng(7000 + static_cast<int>(n) + offset);
      const std::vector<float> x = RandomF32(static_cast<size_t>(n + offset), rng);
      const std::vector<float> y = RandomF32(static_cast<size_t>(n), rng);
      std::vector<float> want = Slice(x, offset, static_cast<size_t>(n));
      cpu::AddInPlace(want.data(), y.data(), n);
      DeviceBuffer<float> dx = ToDevice(x), dy = ToDevice(y);
      GPU_ASSERT_OK(kc::AddInPlace(dx.data() + offset, dy.data(), n, nullptr));
      EXPECT_CLOSE(Slice(ToHost(dx), offset, static_cast<size_t>(n)), want, 0.0,
                   "add in place n " + std::to_string(n) + " offset " + std::to_string(offset));
    }
  }
  // x += x doubles.
  const std::vector<float> x = {1.f, -2.5f, 3.f, 4.f, 5.f};
  DeviceBuffer<float> dx = ToDevice(x);
  GPU_ASSERT_OK(kc::AddInPlace(dx.data(), dx.data(), 5, nullptr));
  EXPECT_EQ(ToHost(dx), (std::vector<float>{2.f, -5.f, 6.f, 8.f, 10.f}));
  EXPECT_EQ(kc::AddInPlace(dx.data(), nullptr, 5, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kc::F32ToF16(dx.data(), -1, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sparkserve::gpu_test
