// GPU GEMM linear (kernels/cuda/gemm_linear.h) against a CPU reference in double on the exact
// dequantised weights (quant/e2m1.h, e4m3.h codecs) and the f16-rounded activations: NVFP4 (with
// per-row divisors of a fused gate|up) and per-channel FP8, rows 1..2048 (one- and multi-split
// plans, partial activation and weight blocks), the 4B's shapes and small odd ones, all three
// epilogues, NaN-poisoned outputs, bad arguments, and the workspace bound.
#include "kernels/cuda/gemm_linear.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "kernels/cuda/decode_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test {
namespace {

namespace kc = kernels::cuda;

// Error bound. Every product the kernel forms is exact: x is the same f16 the reference reads,
// every dequantised weight is exact in f16 (NVFP4: e2m1 * e4m3 * 2^-14 is a multiple of 2^-24
// below 0.17; FP8: e4m3 is a subset of f16), and an f16 x f16 product fits f32's 24 bits. What is
// left is the f32 accumulation (mma's internal adds, the k16 slices, the K splits), each add
// rounding (or truncating) by <= 2^-23 of the running sum: over K <= 9216 (576 k16 slices) the sum
// drifts by < 576 * 2^-23 ~ 7e-5 of the largest partial sum, which for these random rows is of the
// order of max |y|; plus one f32 rounding of the final scale. 1e-3 of max |y| leaves a 10x margin,
// and a wrong K order, scale, tile or row shows as O(1) errors. Outputs stored as f16 add 2^-11.
constexpr double kTol = 1e-3;
constexpr double kF16Tol = 2e-3;

const std::vector<int> kRows = {1, 9, 16, 33, 64, 100, 257, 2048};

// A quantised linear: row-major codes as a checkpoint holds them (exact weight of any element on
// demand) and the device copy in the decode layout the kernels read.
struct TestLinear {
  bool nvfp4 = false;
  int out = 0, in = 0;
  std::vector<uint8_t> codes, scales;  // nvfp4: [out, in/2] + [out, in/16] e4m3; fp8: [out, in]
  std::vector<float> row_scale;        // nvfp4: divisor of each row; fp8: multiplier
  DeviceBuffer<uint8_t> d_codes, d_scales;
  DeviceBuffer<float> d_row;
  kc::Nvfp4LinearDevice nv{};
  kc::Fp8LinearDevice f8{};

  float Weight(int o, int i) const {
    if (!nvfp4) return quant::E4M3ToF32(codes[static_cast<size_t>(o) * in + i]) * row_scale[o];
    const uint8_t b = codes[(static_cast<size_t>(o) * in + i) / 2];
    const float e2m1 = quant::E2M1ToF32(i % 2 ? b >> 4 : b & 0xf);
    return e2m1 * quant::E4M3ToF32(scales[(static_cast<size_t>(o) * in + i) / 16]) / row_scale[o];
  }
  absl::Status Run(const __half* x, int rows, float* y, void* ws, const kc::DecodeEpilogue& e = {}) const {
    return nvfp4 ? kc::Nvfp4GemmLinear(nv, x, rows, y, ws, nullptr, e) : kc::Fp8GemmLinear(f8, x, rows, y, ws, nullptr, e);
  }
};

// NVFP4 weights of several parts stacked along out (one global scale each, per-row divisors when
// more than one). Random codes; group scales mostly 0.25..32 with some e4m3 subnormals and zeros.
TestLinear MakeNvfp4(const std::vector<int>& part_outs, int in, std::mt19937& rng) {
  TestLinear l;
  l.nvfp4 = true;
  for (int p : part_outs) l.out += p;
  l.in = in;
  l.codes.resize(static_cast<size_t>(l.out) * in / 2);
  for (uint8_t& c : l.codes) c = static_cast<uint8_t>(rng());
  l.scales.resize(static_cast<size_t>(l.out) * in / 16);
  for (uint8_t& s : l.scales) {
    const uint32_t r = rng() % 100;
    s = static_cast<uint8_t>(r < 4 ? 0 : (r < 10 ? 1 + rng() % 7 : 0x28 + rng() % 0x39));
  }
  for (size_t p = 0; p < part_outs.size(); ++p) {
    l.row_scale.insert(l.row_scale.end(), static_cast<size_t>(part_outs[p]), 900.f + 1300.f * static_cast<float>(p));
  }
  const kc::Nvfp4DecodeLayout layout = kc::RepackNvfp4ForDecode(l.codes, l.scales, l.out, in);
  l.d_codes = ToDevice(layout.packed);
  l.d_scales = ToDevice(layout.scales);
  if (part_outs.size() > 1) l.d_row = ToDevice(l.row_scale);
  l.nv = {l.d_codes.data(), l.d_scales.data(), l.row_scale[0], l.out, in,
          part_outs.size() > 1 ? l.d_row.data() : nullptr};
  return l;
}

// FP8 weights: random finite e4m3 codes of both signs, per-channel scales ~1e-3.
TestLinear MakeFp8(int out, int in, std::mt19937& rng) {
  TestLinear l;
  l.out = out;
  l.in = in;
  l.codes.resize(static_cast<size_t>(out) * in);
  for (uint8_t& c : l.codes) c = static_cast<uint8_t>((rng() % 0x7f) | ((rng() & 1) << 7));
  l.row_scale.resize(static_cast<size_t>(out));
  for (float& s : l.row_scale) s = 2e-4f + 2e-3f * static_cast<float>(rng() % 1000) / 1000.f;
  l.d_codes = ToDevice(kc::RepackFp8ForDecode(l.codes, out, in));
  l.d_row = ToDevice(l.row_scale);
  l.f8 = {l.d_codes.data(), l.d_row.data(), out, in};
  return l;
}

// f16 activations [rows, in] (N(0,1) with a few large values) and their exact values.
struct Activations {
  std::vector<float> exact;
  DeviceBuffer<__half> device;
  Activations(int rows, int in, std::mt19937& rng) {
    exact = RandomF32(static_cast<size_t>(rows) * in, rng);
    for (int i = 0; i < 8; ++i) exact[rng() % exact.size()] *= 20.f;
    std::vector<__half> h(exact.size());
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = __float2half(exact[i]);
      exact[i] = __half2float(h[i]);
    }
    device = ToDevice(h);
  }
};

// Exact dot products of activation rows with weight rows (weight rows dequantised once, on demand).
class Reference {
 public:
  Reference(const TestLinear& l, const Activations& x) : l_(l), x_(x) {}
  double operator()(int r, int o) {
    auto it = rows_.find(o);
    if (it == rows_.end()) {
      std::vector<double> w(static_cast<size_t>(l_.in));
      for (int i = 0; i < l_.in; ++i) w[i] = l_.Weight(o, i);
      it = rows_.emplace(o, std::move(w)).first;
    }
    const float* xr = x_.exact.data() + static_cast<size_t>(r) * l_.in;
    double s = 0;
    for (int i = 0; i < l_.in; ++i) s += it->second[i] * xr[i];
    return s;
  }

 private:
  const TestLinear& l_;
  const Activations& x_;
  std::map<int, std::vector<double>> rows_;
};

// Indices of 0..n-1 worth checking: all for small n, else block edges, the middle, the ends and
// `random` more.
std::vector<int> Sample(int n, int all_below, int random, std::mt19937& rng) {
  std::set<int> s;
  if (n <= all_below) {
    for (int i = 0; i < n; ++i) s.insert(i);
  } else {
    for (int v : {0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 129, n / 2 - 1, n / 2, n / 2 + 1, n - 2, n - 1}) {
      if (v >= 0 && v < n) s.insert(v);
    }
    for (int i = 0; i < random; ++i) s.insert(static_cast<int>(rng() % static_cast<uint32_t>(n)));
  }
  return {s.begin(), s.end()};
}

template <typename T>
DeviceBuffer<T> Poisoned(size_t count) {  // all bits set: NaN as f32 and as f16
  auto b = DeviceBuffer<T>::Allocate(count);
  EXPECT_TRUE(b.ok());
  EXPECT_EQ(cudaMemset(b->data(), 0xff, count * sizeof(T)), cudaSuccess);
  return std::move(b).value();
}

std::vector<float> HostFloats(const DeviceBuffer<__half>& b) {
  const std::vector<__half> h = ToHost(b);
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

// Every element finite (the poison was overwritten, nothing blew up).
void ExpectAllFinite(const std::vector<float>& got, int cols, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << what << ": element [" << i / cols << ", " << i % cols << "] is " << got[i];
      return;
    }
  }
}

// got[r * cols + c] against want(r, c) over the sampled rows x cols, naming the worst element.
template <typename Want>
void ExpectSampledClose(const std::vector<float>& got, int cols, const std::vector<int>& rows,
                        const std::vector<int>& cs, Want&& want, double tol, const std::string& what) {
  std::vector<float> g, w;
  double worst = -1;
  std::string worst_at;
  for (int r : rows) {
    for (int c : cs) {
      const float gv = got[static_cast<size_t>(r) * cols + c];
      const double wv = want(r, c);
      g.push_back(gv);
      w.push_back(static_cast<float>(wv));
      const double err = std::isfinite(gv) ? std::abs(gv - wv) : INFINITY;
      if (err > worst) {
        worst = err;
        worst_at = "[" + std::to_string(r) + ", " + std::to_string(c) + "] got " + std::to_string(gv) + " want " +
                   std::to_string(wv);
      }
    }
  }
  EXPECT_CLOSE(g, w, tol, what + " (worst " + worst_at + ")");
}

std::string Name(const TestLinear& l, int rows, const char* what) {
  return std::string(l.nvfp4 ? "nvfp4" : "fp8") + " gemm " + std::to_string(l.out) + "x" + std::to_string(l.in) +
         " rows " + std::to_string(rows) + " " + what;
}

// y = x W^T for every row count of `rows_list` against the reference.
void CheckStore(const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::GemmLinearWorkspaceBytes(l.out, l.in, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<int> outs = Sample(l.out, 256, 40, rng);
  for (int rows : rows_list) {
    const std::string name = Name(l, rows, "store");
    DeviceBuffer<float> y = Poisoned<float>(static_cast<size_t>(rows) * l.out);
    GPU_ASSERT_OK(l.Run(x.device.data(), rows, y.data(), ws->data()));
    const std::vector<float> got = ToHost(y);
    ExpectAllFinite(got, l.out, name);
    ExpectSampledClose(got, l.out, Sample(rows, 64, 6, rng), outs, ref, kTol, name);
  }
}

TEST(GemmLinearTest, Nvfp4SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(101);
  CheckStore(MakeNvfp4({40}, 128, rng), kRows, 1);          // out not a multiple of 16, one K step
  CheckStore(MakeNvfp4({120, 80}, 256, rng), kRows, 2);     // fused parts, per-row divisors
  CheckStore(MakeNvfp4({24}, 1024, rng), {1, 9, 40, 300}, 3);  // K splits on a single weight block
  CheckStore(MakeNvfp4({136}, 384, rng), {9, 129}, 4);       // a partial second weight block
}

TEST(GemmLinearTest, Fp8SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(102);
  CheckStore(MakeFp8(24, 64, rng), kRows, 5);
  CheckStore(MakeFp8(40, 192, rng), kRows, 6);
  CheckStore(MakeFp8(200, 1024, rng), {1, 9, 40, 300}, 7);
}

TEST(GemmLinearTest, Nvfp4GateUpOf4B) {  // fused gate|up 2560 -> 2 x 9216, two global scales
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(103);
  CheckStore(MakeNvfp4({9216, 9216}, 2560, rng), kRows, 8);
}

TEST(GemmLinearTest, Nvfp4DownOf4B) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(104);
  CheckStore(MakeNvfp4({2560}, 9216, rng), kRows, 9);
}

TEST(GemmLinearTest, Fp8ShapesOf4B) {  // GDN in_proj_qkvz and out_proj
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(105);
  CheckStore(MakeFp8(12288, 2560, rng), kRows, 10);
  CheckStore(MakeFp8(2560, 4096, rng), kRows, 11);
}

// kSwiGlu: x_out [rows, F] f16 = silu(gate) * up of a fused gate|up (out = 2F).
void CheckSwiGlu(const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int f = l.out / 2, max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::GemmLinearWorkspaceBytes(l.out, l.in, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<int> fs = Sample(f, 128, 24, rng);
  for (int rows : rows_list) {
    const std::string name = Name(l, rows, "swiglu");
    DeviceBuffer<__half> out = Poisoned<__half>(static_cast<size_t>(rows) * f);
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::SwiGlu(out.data());
    GPU_ASSERT_OK(l.Run(x.device.data(), rows, nullptr, ws->data(), e));
    const std::vector<float> got = HostFloats(out);
    ExpectAllFinite(got, f, name);
    auto want = [&](int r, int o) {
      const double g = ref(r, o), u = ref(r, o + f);
      return g / (1.0 + std::exp(-g)) * u;
    };
    ExpectSampledClose(got, f, Sample(rows, 64, 6, rng), fs, want, kF16Tol, name);
  }
}

TEST(GemmLinearTest, SwiGluEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(106);
  CheckSwiGlu(MakeNvfp4({9216, 9216}, 2560, rng), {9, 100, 2048}, 12);
  CheckSwiGlu(MakeFp8(200, 256, rng), {9, 33, 257}, 13);  // F = 100: gate and up share a weight tile
}

// kAddRmsNorm: residual += y in place, x_out = residual / rms * (1 + w) as f16.
void CheckAddRmsNorm(const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int d = l.out, max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const float eps = 1e-6f;
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::GemmLinearWorkspaceBytes(d, l.in, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<float> norm_w = RandomF32(static_cast<size_t>(d), rng, 0.1f);
  DeviceBuffer<float> d_norm_w = ToDevice(norm_w);
  std::vector<int> all_d(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) all_d[i] = i;
  for (int rows : rows_list) {
    const std::string name = Name(l, rows, "add+rmsnorm");
    const std::vector<float> residual0 = RandomF32(static_cast<size_t>(rows) * d, rng, 0.05f);
    DeviceBuffer<float> residual = ToDevice(residual0);
    DeviceBuffer<__half> out = Poisoned<__half>(static_cast<size_t>(rows) * d);
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::AddRmsNorm(out.data(), residual.data(), d_norm_w.data(), eps);
    GPU_ASSERT_OK(l.Run(x.device.data(), rows, nullptr, ws->data(), e));
    const std::vector<float> got_res = ToHost(residual), got_out = HostFloats(out);
    ExpectAllFinite(got_res, d, name + " residual");
    ExpectAllFinite(got_out, d, name + " x_out");
    const std::vector<int> rs = Sample(rows, 8, 4, rng);
    std::map<int, std::vector<double>> sum;  // residual row after the add, and its 1 / rms
    std::map<int, double> inv;
    for (int r : rs) {
      std::vector<double>& s = sum[r];
      double ss = 0;
      for (int o = 0; o < d; ++o) {
        s.push_back(residual0[static_cast<size_t>(r) * d + o] + ref(r, o));
        ss += s.back() * s.back();
      }
      inv[r] = 1.0 / std::sqrt(ss / d + eps);
    }
    ExpectSampledClose(got_res, d, rs, all_d, [&](int r, int o) { return sum[r][o]; }, kTol, name + " residual");
    ExpectSampledClose(
        got_out, d, rs, all_d, [&](int r, int o) { return sum[r][o] * inv[r] * (1.0 + norm_w[o]); }, kF16Tol,
        name + " x_out");
  }
}

TEST(GemmLinearTest, AddRmsNormEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(107);
  CheckAddRmsNorm(MakeFp8(2560, 4096, rng), {9, 64, 257}, 14);  // GDN out_proj of the 4B
  CheckAddRmsNorm(MakeNvfp4({200}, 256, rng), {9, 100}, 15);
}

TEST(GemmLinearTest, WorkspaceCoversEverySmallerCall) {
  ASSERT_TRUE(HasCudaDevice());
  for (const auto& [out, in] : std::vector<std::pair<int, int>>{{40, 128}, {2560, 9216}, {18432, 2560}, {200, 4096}}) {
    size_t prev = 0;
    for (int rows = 1; rows <= 2000; ++rows) {
      const size_t b = kc::GemmLinearWorkspaceBytes(out, in, rows);
      // Never shrinks (one buffer serves every step) and holds the unsummed output at least.
      ASSERT_GE(b, prev) << out << "x" << in << " rows " << rows;
      ASSERT_GE(b, static_cast<size_t>(rows) * out * sizeof(float)) << out << "x" << in << " rows " << rows;
      prev = b;
    }
  }
}

TEST(GemmLinearTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(108);
  TestLinear nv = MakeNvfp4({40}, 128, rng), f8 = MakeFp8(40, 64, rng);
  DeviceBuffer<__half> x = ToDevice(std::vector<__half>(16 * 128 + 8, __float2half(1.f)));
  DeviceBuffer<float> y = Poisoned<float>(16 * 40);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::GemmLinearWorkspaceBytes(40, 128, 16));
  ASSERT_TRUE(ws.ok());
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(nv.Run(x.data(), 0, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(f8.Run(x.data(), -2, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(nv.Run(nullptr, 9, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(nv.Run(x.data() + 1, 9, y.data(), ws->data())), kBad);  // x not 16-byte aligned
  EXPECT_EQ(code(nv.Run(x.data(), 9, nullptr, ws->data())), kBad);      // kStore without y
  kc::DecodeEpilogue swiglu;
  swiglu.kind = kc::DecodeEpilogue::Kind::kSwiGlu;  // no x_out
  EXPECT_EQ(code(f8.Run(x.data(), 9, nullptr, ws->data(), swiglu)), kBad);
  kc::DecodeEpilogue norm;
  norm.kind = kc::DecodeEpilogue::Kind::kAddRmsNorm;  // no residual / weights
  EXPECT_EQ(code(f8.Run(x.data(), 9, nullptr, ws->data(), norm)), kBad);
  kc::DecodeEpilogue odd_swiglu = swiglu;  // out must be even
  auto half_out = DeviceBuffer<__half>::Allocate(16 * 40);
  ASSERT_TRUE(half_out.ok());
  odd_swiglu.x_out = half_out->data();
  kc::Fp8LinearDevice odd = f8.f8;
  odd.out = 39;
  EXPECT_EQ(code(kc::Fp8GemmLinear(odd, x.data(), 9, nullptr, ws->data(), nullptr, odd_swiglu)), kBad);
  kc::Nvfp4LinearDevice bad_in = nv.nv;
  bad_in.in = 64;  // NVFP4 needs in % 128 == 0
  const absl::Status s = kc::Nvfp4GemmLinear(bad_in, x.data(), 9, y.data(), ws->data(), nullptr);
  EXPECT_EQ(s.code(), kBad);
  EXPECT_NE(std::string(s.message()).find("128"), std::string::npos) << s.message();
  kc::Nvfp4LinearDevice no_scale = nv.nv;
  no_scale.global_scale = 0.f;
  EXPECT_EQ(code(kc::Nvfp4GemmLinear(no_scale, x.data(), 9, y.data(), ws->data(), nullptr)), kBad);
  // A split plan (40 outputs, in 1024 -> several K splits at 9 rows) without a workspace.
  TestLinear deep = MakeFp8(40, 1024, rng);
  DeviceBuffer<__half> xd = ToDevice(std::vector<__half>(9 * 1024, __float2half(1.f)));
  EXPECT_EQ(code(deep.Run(xd.data(), 9, y.data(), nullptr)), kBad);
  // y untouched by the rejected calls.
  for (const float v : ToHost(y)) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace sparkserve::gpu_test
