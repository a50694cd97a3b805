// Shared by the quantised-linear GPU tests (gemm_linear_test.cc, skinny_linear_test.cc): random
// NVFP4 / FP8 linears in the decode layout, f16 activations, an exact double reference, and the
// store / SwiGLU / add+RMSNorm checks, run on any of the three kernel families (LinearPath).
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/gemm_linear.h"
#include "kernels/cuda/skinny_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "tests/gpu/ops/gpu_test_util.h"

namespace sparkserve::gpu_test::linear_test {

namespace kc = kernels::cuda;

// Error bound. Every product the kernel forms is exact: x is the same f16 the reference reads,
// every dequantised weight is exact in f16 (NVFP4: e2m1 * e4m3 * 2^-14 is a multiple of 2^-24
// below 0.17; FP8: e4m3 is a subset of f16), and an f16 x f16 product fits f32's 24 bits. What is
// left is the f32 accumulation (mma's internal adds, the k16 slices, the K splits), each add
// rounding (or truncating) by <= 2^-23 of the running sum: over K <= 9216 (576 k16 slices) the sum
// drifts by < 576 * 2^-23 ~ 7e-5 of the largest partial sum, which for these random rows is of the
// order of max |y|; plus one f32 rounding of the final scale. 1e-3 of max |y| leaves a 10x margin,
// and a wrong K order, scale, tile or row shows as O(1) errors. Outputs stored as f16 add 2^-11.
inline constexpr double kTol = 1e-3;
inline constexpr double kF16Tol = 2e-3;


// Which kernel family a check runs: the decode GEMV (1..8 rows), the skinny kernel (1..64), the
// GEMM (any; the device's kernel: wgmma on sm_90a), the GEMM's mma.sync kernel forced, or the one
// CudaLinear::Run would pick for the row count.
enum class LinearPath { kDecode, kSkinny, kGemm, kGemmMma, kByRows };

inline const char* PathName(LinearPath p) {
  switch (p) {
    case LinearPath::kDecode: return "decode";
    case LinearPath::kSkinny: return "skinny";
    case LinearPath::kGemm: return kc::DeviceRunsWgmma() ? "gemm-wgmma" : "gemm";
    case LinearPath::kGemmMma: return "gemm-mma";
    default: return "by-rows";
  }
}

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
  absl::Status Run(LinearPath path, const __half* x, int rows, float* y, void* ws,
                   const kc::DecodeEpilogue& e = {}) const {
    if (path == LinearPath::kByRows) {
      path = rows <= kc::kMaxDecodeRows ? LinearPath::kDecode
                                        : (rows <= kc::kMaxSkinnyRows ? LinearPath::kSkinny : LinearPath::kGemm);
    }
    switch (path) {
      case LinearPath::kDecode:
        return nvfp4 ? kc::Nvfp4DecodeLinear(nv, x, rows, y, ws, nullptr, e) : kc::Fp8DecodeLinear(f8, x, rows, y, ws, nullptr, e);
      case LinearPath::kSkinny:
        return nvfp4 ? kc::Nvfp4SkinnyLinear(nv, x, rows, y, ws, nullptr, e) : kc::Fp8SkinnyLinear(f8, x, rows, y, ws, nullptr, e);
      default: {
        const kc::GemmKernel k = path == LinearPath::kGemmMma ? kc::GemmKernel::kMma : kc::GemmKernel::kAuto;
        return nvfp4 ? kc::Nvfp4GemmLinear(nv, x, rows, y, ws, nullptr, e, k)
                     : kc::Fp8GemmLinear(f8, x, rows, y, ws, nullptr, e, k);
      }
    }
  }
  // Scratch for every call of 1..rows rows on `path` (kByRows: all three).
  size_t WorkspaceBytes(LinearPath path, int rows) const {
    size_t b = 16;
    if (path == LinearPath::kDecode || path == LinearPath::kByRows) {
      b = std::max(b, kc::DecodeLinearWorkspaceBytes(out, in, std::min(rows, kc::kMaxDecodeRows)));
    }
    if (path == LinearPath::kSkinny || path == LinearPath::kByRows) {
      b = std::max(b, kc::SkinnyLinearWorkspaceBytes(out, in, std::min(rows, kc::kMaxSkinnyRows)));
    }
    if (path == LinearPath::kGemm || path == LinearPath::kGemmMma || path == LinearPath::kByRows) {
      b = std::max(b, kc::GemmLinearWorkspaceBytes(out, in, rows));
    }
    return b;
  }
};

// NVFP4 weights of several parts stacked along out (one global scale each, per-row divisors when
// more than one). Random codes; group scales mostly 0.25..32 with some e4m3 subnormals and zeros.
inline TestLinear MakeNvfp4(const std::vector<int>& part_outs, int in, std::mt19937& rng) {
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
inline TestLinear MakeFp8(int out, int in, std::mt19937& rng) {
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
inline std::vector<int> Sample(int n, int all_below, int random, std::mt19937& rng) {
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
inline DeviceBuffer<T> Poisoned(size_t count) {  // all bits set: NaN as f32 and as f16
  auto b = DeviceBuffer<T>::Allocate(count);
  EXPECT_TRUE(b.ok());
  EXPECT_EQ(cudaMemset(b->data(), 0xff, count * sizeof(T)), cudaSuccess);
  return std::move(b).value();
}

inline std::vector<float> HostFloats(const DeviceBuffer<__half>& b) {
  const std::vector<__half> h = ToHost(b);
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

// Every element finite (the poison was overwritten, nothing blew up).
inline void ExpectAllFinite(const std::vector<float>& got, int cols, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ADD_FAILURE() << what << ": element [" << i / cols << ", " << i % cols << "] is " << got[i];
      return;
    }
  }
}

// got[r * cols + c] against want(r, c) over the sampled rows x cols, naming the worst element.
template <typename Want>
inline void ExpectSampledClose(const std::vector<float>& got, int cols, const std::vector<int>& rows,
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

inline std::string Name(LinearPath path, const TestLinear& l, int rows, const char* what) {
  return std::string(l.nvfp4 ? "nvfp4 " : "fp8 ") + PathName(path) + " " + std::to_string(l.out) + "x" + std::to_string(l.in) +
         " rows " + std::to_string(rows) + " " + what;
}

// y = x W^T for every row count of `rows_list` against the reference.
inline void CheckStore(LinearPath path, const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(l.WorkspaceBytes(path, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<int> outs = Sample(l.out, 256, 40, rng);
  for (int rows : rows_list) {
    const std::string name = Name(path, l, rows, "store");
    DeviceBuffer<float> y = Poisoned<float>(static_cast<size_t>(rows) * l.out);
    GPU_ASSERT_OK(l.Run(path, x.device.data(), rows, y.data(), ws->data()));
    const std::vector<float> got = ToHost(y);
    ExpectAllFinite(got, l.out, name);
    ExpectSampledClose(got, l.out, Sample(rows, 64, 6, rng), outs, ref, kTol, name);
  }
}

// kSwiGlu: x_out [rows, F] f16 = silu(gate) * up of a fused gate|up (out = 2F).
inline void CheckSwiGlu(LinearPath path, const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int f = l.out / 2, max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(l.WorkspaceBytes(path, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<int> fs = Sample(f, 128, 24, rng);
  for (int rows : rows_list) {
    const std::string name = Name(path, l, rows, "swiglu");
    DeviceBuffer<__half> out = Poisoned<__half>(static_cast<size_t>(rows) * f);
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::SwiGlu(out.data());
    GPU_ASSERT_OK(l.Run(path, x.device.data(), rows, nullptr, ws->data(), e));
    const std::vector<float> got = HostFloats(out);
    ExpectAllFinite(got, f, name);
    auto want = [&](int r, int o) {
      const double g = ref(r, o), u = ref(r, o + f);
      return g / (1.0 + std::exp(-g)) * u;
    };
    ExpectSampledClose(got, f, Sample(rows, 64, 6, rng), fs, want, kF16Tol, name);
  }
}

// kAddRmsNorm: residual += y in place, x_out = residual / rms * (1 + w) as f16.
inline void CheckAddRmsNorm(LinearPath path, const TestLinear& l, const std::vector<int>& rows_list, uint32_t seed) {
  std::mt19937 rng(seed);
  const int d = l.out, max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const float eps = 1e-6f;
  const Activations x(max_rows, l.in, rng);
  Reference ref(l, x);
  auto ws = DeviceBuffer<uint8_t>::Allocate(l.WorkspaceBytes(path, max_rows));
  ASSERT_TRUE(ws.ok());
  const std::vector<float> norm_w = RandomF32(static_cast<size_t>(d), rng, 0.1f);
  DeviceBuffer<float> d_norm_w = ToDevice(norm_w);
  std::vector<int> all_d(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) all_d[i] = i;
  for (int rows : rows_list) {
    const std::string name = Name(path, l, rows, "add+rmsnorm");
    const std::vector<float> residual0 = RandomF32(static_cast<size_t>(rows) * d, rng, 0.05f);
    DeviceBuffer<float> residual = ToDevice(residual0);
    DeviceBuffer<__half> out = Poisoned<__half>(static_cast<size_t>(rows) * d);
    const kc::DecodeEpilogue e = kc::DecodeEpilogue::AddRmsNorm(out.data(), residual.data(), d_norm_w.data(), eps);
    GPU_ASSERT_OK(l.Run(path, x.device.data(), rows, nullptr, ws->data(), e));
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

}  // namespace sparkserve::gpu_test::linear_test
