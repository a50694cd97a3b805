// gpu_kernel_check's shared pieces: CUDA/status checks that exit, the summary table, random NVFP4 /
// FP8 weights as compressed-tensors producers make them, activations, the double reference, graph
// timing and the L2-defeating rotation count. Included by kernel_check.cc and kernel_check_prefill.cc.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/decode_linear.h"
#include "kernels/cuda/gdn.h"
#include "kernels/cuda/gemm_linear.h"
#include "kernels/cuda/memory_bandwidth.h"
#include "kernels/cuda/nvfp4_activation_quant.h"
#include "kernels/cuda/skinny_linear.h"
#include "kernels/cuda/w4a4_linear.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"

namespace sk = sparkserve::kernels::cuda;
namespace sq = sparkserve::quant;
namespace sc = sparkserve::core;

namespace kernel_check {

#define CHECK_CUDA(expr)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (expr);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

#define CHECK_OK(expr)                                                                           \
  do {                                                                                           \
    auto s_ = (expr);                                                                            \
    if (!s_.ok()) {                                                                              \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, std::string(s_.message()).c_str()); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

struct Summary {
  std::string name;
  double gbps = 0, ratio = 0, us = 0, tflops = 0;
};
inline std::vector<Summary> g_summary;
inline int g_failures = 0;
inline double g_copy_bw = 0;

template <typename T>
inline T* DeviceCopy(const std::vector<T>& v) {
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, v.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

// A random weight matrix quantised the way compressed-tensors producers do.
struct Nvfp4Host {
  int out, in;
  std::vector<uint8_t> packed, scales;
  float global_scale;
  std::vector<double> dequant;  // [out, in]
};

inline Nvfp4Host MakeNvfp4(int out, int in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> w(static_cast<size_t>(out) * in);
  for (auto& v : w) v = normal(rng);
  for (int i = 0; i < 8; ++i) w[rng() % w.size()] *= 20.f;  // outliers
  float amax = 0;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  Nvfp4Host h{out, in, std::vector<uint8_t>(w.size() / 2), std::vector<uint8_t>(w.size() / 16), 448.f * 6.f / amax, {}};
  h.dequant.resize(w.size());
  for (size_t g = 0; g < w.size() / 16; ++g) {
    float gmax = 0;
    for (int i = 0; i < 16; ++i) gmax = std::max(gmax, std::fabs(w[g * 16 + i]));
    const uint8_t s = sq::F32ToE4M3(gmax / 6.f * h.global_scale);
    h.scales[g] = s;
    const float sf = sq::E4M3ToF32(s);
    for (int i = 0; i < 16; i += 2) {
      const float a = sf > 0 ? w[g * 16 + i] * h.global_scale / sf : 0.f;
      const float b = sf > 0 ? w[g * 16 + i + 1] * h.global_scale / sf : 0.f;
      const uint8_t ca = sq::F32ToE2M1(a), cb = sq::F32ToE2M1(b);
      h.packed[(g * 16 + i) / 2] = sq::PackE2M1(ca, cb);
      h.dequant[g * 16 + i] = double(sq::E2M1ToF32(ca)) * sf / h.global_scale;
      h.dequant[g * 16 + i + 1] = double(sq::E2M1ToF32(cb)) * sf / h.global_scale;
    }
  }
  return h;
}

struct Fp8Host {
  int out, in;
  std::vector<uint8_t> weight;
  std::vector<float> scales;
  std::vector<double> dequant;
};

inline Fp8Host MakeFp8(int out, int in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 0.02f);
  Fp8Host h{out, in, std::vector<uint8_t>(static_cast<size_t>(out) * in), std::vector<float>(out), {}};
  h.dequant.resize(h.weight.size());
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    float amax = 0;
    for (auto& v : row) {
      v = normal(rng);
      amax = std::max(amax, std::fabs(v));
    }
    h.scales[o] = amax / 448.f;
    for (int i = 0; i < in; ++i) {
      const uint8_t c = sq::F32ToE4M3(row[i] / h.scales[o]);
      h.weight[static_cast<size_t>(o) * in + i] = c;
      h.dequant[static_cast<size_t>(o) * in + i] = double(sq::E4M3ToF32(c)) * h.scales[o];
    }
  }
  return h;
}

// Random fp16 activations (the values the kernel sees) and their exact doubles.
inline std::vector<__half> MakeActivations(int rows, int in, std::mt19937& rng, std::vector<double>* exact) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<__half> x(static_cast<size_t>(rows) * in);
  exact->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t bits = sc::F32ToF16(normal(rng));
    __half_raw raw;
    raw.x = bits;
    x[i] = __half(raw);
    (*exact)[i] = sc::F16ToF32(bits);
  }
  return x;
}

inline double RelativeError(const std::vector<float>& got, const std::vector<double>& want, bool* has_nan) {
  double num = 0, den = 0;
  *has_nan = false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) *has_nan = true;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

inline std::vector<double> Reference(const std::vector<double>& w, const std::vector<double>& x, int rows, int out,
                                     int in) {
  std::vector<double> y(static_cast<size_t>(rows) * out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      const double* wr = &w[static_cast<size_t>(o) * in];
      const double* xr = &x[static_cast<size_t>(r) * in];
      for (int i = 0; i < in; ++i) s += wr[i] * xr[i];
      y[static_cast<size_t>(r) * out + o] = s;
    }
  return y;
}

inline void Report(const std::string& name, double err, bool nan, double tol) {
  const bool ok = !nan && err <= tol;
  if (!ok) ++g_failures;
  std::printf("%-4s %-44s rel_err %.3e (tol %.0e)%s\n", ok ? "ok" : "FAIL", name.c_str(), err, tol, nan ? " NaN!" : "");
}

// Median time of one launch: `inner` launches captured in a CUDA graph (as the decode step runs),
// replayed 15 times after a warm-up.
template <typename Launch>
inline double MedianMicros(Launch launch, int inner) {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < inner; ++i) launch(i, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  for (int rep = 0; rep < 15; ++rep) {
    CHECK_CUDA(cudaEventRecord(a, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return ms[ms.size() / 2] * 1000.0 / inner;
}

// Copies of the weights so that consecutive timed launches never find them in the 60 MB L2.
inline int RotationCopies(size_t bytes) {
  return static_cast<int>(std::max<size_t>(2, (size_t{256} << 20) / bytes + 1));
}

// kernel_check_prefill.cc: the many-row GEMM, GDN prefill and W4A4 paths (checks + timings).
// Which many-row kernel CheckGemm runs: the GEMM the device picks (wgmma on sm_90a), the GEMM's
// mma.sync kernel forced, or the skinny kernel (skinny_linear.h, rows <= 64), on the same checks.
enum class ManyRowKernel { kGemm, kGemmMma, kSkinny };
void CheckGemm(bool nvfp4, int out, int in, std::mt19937& rng, const std::vector<int>& rows_list,
               ManyRowKernel kernel = ManyRowKernel::kGemm);
void CheckGdnPrefill(int T, std::mt19937& rng);
void TimeActivationQuant(int rows, int in, std::mt19937& rng);
void TimeW4A4(int rows, int out, int in, std::mt19937& rng);
// kernel_check_attention.cc: paged-attention decode of the 4B's shape, seqs x context (checked, then timed).
void TimeAttentionDecode(int seqs, int context, bool fp8, std::mt19937& rng, bool time_it);

}  // namespace kernel_check
