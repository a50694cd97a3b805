// gpu_kernel_check, the paths past the decode GEMVs: the tensor-core GEMM linear at batched-decode
// and prefill row counts, one 4B layer's GDN prefill (chunked vs sequential), and the W4A4 prefill
// (activation quantisation anywhere, the GEMM on sm_120/121 only).
#include "tests/gpu/kernel_check_util.h"

namespace kernel_check {

// The GEMM linear (gemm_linear.h) on one random weight: checked on sampled outputs (a full double
// reference of 4096 rows would take minutes), then timed: TFLOP/s at prefill row counts, weight
// GB/s against the copy bandwidth at batched-decode row counts (weights rotated past the L2).
// A failed call is a reported failure, not an exit.
void CheckGemm(bool nvfp4, int out, int in, std::mt19937& rng, const std::vector<int>& rows_list,
               ManyRowKernel kernel) {
  const bool skinny = kernel == ManyRowKernel::kSkinny;
  const sk::GemmKernel gemm = kernel == ManyRowKernel::kGemmMma ? sk::GemmKernel::kMma : sk::GemmKernel::kAuto;
  const char* kernel_name =
      skinny ? " skinny" : (sk::ResolveGemmKernel(gemm) == sk::GemmKernel::kWgmma ? " wgmma" : " mma");
  const std::string kind = std::string(nvfp4 ? "nvfp4" : "fp8") + kernel_name;
  std::vector<double> dequant;
  std::vector<uint8_t> codes, group_scales;  // decode layouts
  std::vector<float> channel_scales;
  float global_scale = 1.f;
  if (nvfp4) {
    Nvfp4Host h = MakeNvfp4(out, in, rng);
    sk::Nvfp4DecodeLayout layout = sk::RepackNvfp4ForDecode(h.packed, h.scales, out, in);
    codes = std::move(layout.packed);
    group_scales = std::move(layout.scales);
    global_scale = h.global_scale;
    dequant = std::move(h.dequant);
  } else {
    Fp8Host h = MakeFp8(out, in, rng);
    codes = sk::RepackFp8ForDecode(h.weight, out, in);
    channel_scales = std::move(h.scales);
    dequant = std::move(h.dequant);
  }
  const size_t weight_bytes = codes.size() + group_scales.size() + channel_scales.size() * sizeof(float);
  const int copies = RotationCopies(weight_bytes);
  std::vector<uint8_t*> d_codes(copies), d_group(copies);
  for (int c = 0; c < copies; ++c) {
    d_codes[c] = DeviceCopy(codes);
    d_group[c] = nvfp4 ? DeviceCopy(group_scales) : nullptr;
  }
  float* d_channel = nvfp4 ? nullptr : DeviceCopy(channel_scales);
  auto run = [&](int copy, const __half* x, int rows, float* y, void* ws, cudaStream_t st) {
    if (nvfp4) {
      const sk::Nvfp4LinearDevice w{d_codes[copy], d_group[copy], global_scale, out, in};
      return skinny ? sk::Nvfp4SkinnyLinear(w, x, rows, y, ws, st) : sk::Nvfp4GemmLinear(w, x, rows, y, ws, st, {}, gemm);
    }
    const sk::Fp8LinearDevice w{d_codes[copy], d_channel, out, in};
    return skinny ? sk::Fp8SkinnyLinear(w, x, rows, y, ws, st) : sk::Fp8GemmLinear(w, x, rows, y, ws, st, {}, gemm);
  };
  const int max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  void* ws = nullptr;
  const size_t ws_bytes = skinny ? sk::SkinnyLinearWorkspaceBytes(out, in, max_rows) : sk::GemmLinearWorkspaceBytes(out, in, max_rows);
  CHECK_CUDA(cudaMalloc(&ws, std::max<size_t>(16, ws_bytes)));
  std::vector<double> xe;
  std::vector<__half> x = MakeActivations(max_rows, in, rng, &xe);
  __half* d_x = DeviceCopy(x);
  float* d_y = nullptr;
  CHECK_CUDA(cudaMalloc(&d_y, sizeof(float) * max_rows * out));
  for (int rows : rows_list) {
    const std::string name = kind + " " + std::to_string(out) + "x" + std::to_string(in) + " rows " + std::to_string(rows);
    CHECK_CUDA(cudaMemset(d_y, 0xff, sizeof(float) * rows * out));  // NaN poison
    const absl::Status status = run(0, d_x, rows, d_y, ws, nullptr);
    if (!status.ok() || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("FAIL %-44s %s %s\n", name.c_str(), std::string(status.message()).c_str(),
                  cudaGetErrorString(cudaGetLastError()));
      ++g_failures;
      continue;
    }
    std::vector<float> y(static_cast<size_t>(rows) * out);
    CHECK_CUDA(cudaMemcpy(y.data(), d_y, y.size() * 4, cudaMemcpyDeviceToHost));
    bool nan = false;
    for (float v : y) nan = nan || !std::isfinite(v);
    // Sampled rows (block edges, ends, random) x sampled outputs.
    std::vector<int> rs = {0, rows - 1}, os = {0, out - 1, out / 2};
    for (int r : {31, 32, 63, 64, 127, 128}) if (r < rows) rs.push_back(r);
    for (int i = 0; i < 6; ++i) rs.push_back(static_cast<int>(rng() % static_cast<uint32_t>(rows)));
    for (int i = 0; i < 64; ++i) os.push_back(static_cast<int>(rng() % static_cast<uint32_t>(out)));
    std::vector<float> got;
    std::vector<double> want;
    for (int r : rs) {
      for (int o : os) {
        got.push_back(y[static_cast<size_t>(r) * out + o]);
        double s = 0;
        for (int i = 0; i < in; ++i) s += dequant[static_cast<size_t>(o) * in + i] * xe[static_cast<size_t>(r) * in + i];
        want.push_back(s);
      }
    }
    bool sample_nan = false;
    const double err = RelativeError(got, want, &sample_nan);
    Report(name, err, nan || sample_nan, 1e-4);
    if (static_cast<int64_t>(out) * in < (int64_t{1} << 20)) continue;  // small shapes: checked, not timed
    const int inner = rows >= 1024 ? 5 : copies * 4;
    bool launch_failed = false;
    const double us = MedianMicros(
        [&](int i, cudaStream_t st) { launch_failed |= !run(i % copies, d_x, rows, d_y, ws, st).ok(); }, inner);
    if (launch_failed || cudaGetLastError() != cudaSuccess) {
      std::printf("FAIL %-44s a timed launch failed\n", name.c_str());
      ++g_failures;
      continue;
    }
    const double gbps = weight_bytes / (us * 1e-6) / 1e9;
    const double tflops = 2.0 * rows * out * in / (us * 1e-6) / 1e12;
    const std::string tname = kind + " " + std::to_string(out) + "x" + std::to_string(in) + " b" + std::to_string(rows);
    std::printf("time %-40s %8.2f us %8.1f GB/s (%.0f%% of copy bw) %7.1f TFLOP/s (graph replay)\n", tname.c_str(), us,
                gbps, 100.0 * gbps * 1e9 / g_copy_bw, tflops);
    g_summary.push_back({tname, gbps, gbps * 1e9 / g_copy_bw, us, tflops});
  }
  for (int c = 0; c < copies; ++c) {
    cudaFree(d_codes[c]);
    cudaFree(d_group[c]);
  }
  cudaFree(d_channel);
  cudaFree(ws);
  cudaFree(d_x);
  cudaFree(d_y);
}

// ---- Gated DeltaNet prefill: one 4B layer (nk 16, nv 32, dk = dv = 128), T tokens as 1, 4 and 8
// fresh seqs of T / seqs tokens (4096: 1 x 4096, 4 x 1024, 8 x 512), the chunked path (TF32 tensor
// cores with the staging this GPU picks, the same forced to the small staging sm_120 / sm_121 run,
// and the f32-emulated-mma variant, checked only) against the sequential kernel: outputs and states
// checked against the sequential kernel's (itself checked against the CPU in gpu_ops_test), all but
// the emulated one timed (ms a layer). Any error is a reported failure, never an exit.
struct GdnPrefillDevice {
  float *mixed = nullptr, *ab = nullptr, *z = nullptr, *a_log = nullptr, *dt_bias = nullptr, *norm_w = nullptr;
  static constexpr int kKernels = 4;
  float* state[kKernels] = {};
  __half* out[kKernels] = {};
  int32_t* meta = nullptr;
  void* workspace = nullptr;
  void Free() {
    for (float* q : {mixed, ab, z, a_log, dt_bias, norm_w}) cudaFree(q);
    for (float* q : state) cudaFree(q);
    for (__half* q : out) cudaFree(q);
    cudaFree(meta);
    cudaFree(workspace);
  }
};

bool GdnOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  ++g_failures;
  std::printf("FAIL gdn prefill: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// max |got - want| / max |want| (NaN/inf: infinite).
double MaxRelative(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    ref = std::max(ref, std::fabs(double(want[i])));
  }
  return err / ref;
}

void CheckGdnPrefillSplit(int T, int seqs, std::mt19937& rng) {
  constexpr int nk = 16, nv = 32, dk = 128, dv = 128;
  constexpr int C = 2 * nk * dk + nv * dv;
  const sk::GdnShape shape{nk, nv, dk, dv};
  const int per_seq = T / seqs;
  T = per_seq * seqs;
  const size_t state_floats = size_t{nv} * dk * dv * seqs;
  const std::string label = std::to_string(seqs) + " x " + std::to_string(per_seq);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto random = [&](size_t n, float scale, float offset) {
    std::vector<float> v(n);
    for (auto& x : v) x = offset + scale * uni(rng);
    return v;
  };
  GdnPrefillDevice d;
  auto upload = [&](float** dst, const std::vector<float>& v) {
    return GdnOk(cudaMalloc(dst, v.size() * sizeof(float)), "cudaMalloc") &&
           GdnOk(cudaMemcpy(*dst, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
  };
  bool ok = upload(&d.mixed, random(size_t(T) * C, 1.f, 0.f)) && upload(&d.ab, random(size_t(T) * 2 * nv, 1.f, 0.f)) &&
            upload(&d.z, random(size_t(T) * nv * dv, 1.f, 0.f)) && upload(&d.a_log, random(nv, 0.5f, 0.f)) &&
            upload(&d.dt_bias, random(nv, 0.5f, 0.f)) && upload(&d.norm_w, random(dv, 0.1f, 1.f));
  constexpr int kKernels = GdnPrefillDevice::kKernels;
  for (int k = 0; ok && k < kKernels; ++k) {
    ok = upload(&d.state[k], std::vector<float>(state_floats, NAN)) &&
         GdnOk(cudaMalloc(&d.out[k], size_t(T) * nv * dv * sizeof(__half)), "cudaMalloc") &&
         GdnOk(cudaMemset(d.out[k], 0xff, size_t(T) * nv * dv * sizeof(__half)), "poison");
  }
  std::vector<int32_t> meta;  // token_begin [seqs + 1], start_pos [seqs] (fresh), slots [seqs]
  for (int s = 0; s <= seqs; ++s) meta.push_back(s * per_seq);
  for (int s = 0; s < seqs; ++s) meta.push_back(0);
  for (int s = 0; s < seqs; ++s) meta.push_back(s);
  const size_t ws_bytes = sk::GdnWorkspaceBytes(shape, T, seqs);
  ok = ok && GdnOk(cudaMalloc(&d.meta, meta.size() * sizeof(int32_t)), "cudaMalloc") &&
       GdnOk(cudaMemcpy(d.meta, meta.data(), meta.size() * sizeof(int32_t), cudaMemcpyHostToDevice), "upload") &&
       GdnOk(cudaMalloc(&d.workspace, std::max<size_t>(ws_bytes, 16)), "cudaMalloc") &&
       GdnOk(cudaMemset(d.workspace, 0xff, std::max<size_t>(ws_bytes, 16)), "poison");
  if (ok && ws_bytes == 0) {
    ++g_failures;
    std::printf("FAIL gdn prefill %s: GdnWorkspaceBytes is 0: the chunked path is not available here\n", label.c_str());
    ok = false;
  }
  if (!ok) {
    d.Free();
    return;
  }
  sk::RaggedBatchDevice batch;
  batch.num_seqs = seqs;
  batch.num_tokens = T;
  batch.max_seq_tokens = per_seq;
  batch.token_begin = d.meta;
  batch.start_pos = d.meta + seqs + 1;
  batch.slots = d.meta + 2 * seqs + 1;
  const sk::GdnInput in{d.mixed, C, d.ab, d.ab + nv, 2 * nv, d.z, nv * dv};
  const sk::GdnWorkspace ws{d.workspace, ws_bytes};
  // The emulated variant last: a correctness cross-check, not timed.
  const sk::GdnKernel kernels[kKernels] = {sk::GdnKernel::kSequential, sk::GdnKernel::kChunked,
                                           sk::GdnKernel::kChunkedSmall, sk::GdnKernel::kChunkedSimt};
  const char* names[kKernels] = {"sequential", "chunked tf32", "chunked small tf32", "chunked f32-emulated"};
  constexpr int kTimed = 3;
  auto run = [&](int k, cudaStream_t stream) {
    return sk::GatedDeltaNetWith(kernels[k], in, shape, d.a_log, d.dt_bias, d.norm_w, 1e-6f, batch, d.state[k],
                                 nullptr, 0, d.out[k], stream, ws);
  };
  std::vector<float> outs[kKernels], states[kKernels];
  double us[kKernels] = {};
  cudaEvent_t a = nullptr, b = nullptr;
  ok = GdnOk(cudaEventCreate(&a), "event") && GdnOk(cudaEventCreate(&b), "event");
  for (int k = 0; ok && k < kKernels; ++k) {
    const absl::Status st = run(k, nullptr);  // fresh seqs: the NaN state is never read
    if (!st.ok()) {
      ++g_failures;
      std::printf("FAIL gdn prefill %s %s: %s\n", label.c_str(), names[k], std::string(st.message()).c_str());
      ok = false;
      break;
    }
    if (!GdnOk(cudaDeviceSynchronize(), names[k])) {
      ok = false;
      break;
    }
    std::vector<__half> h(size_t(T) * nv * dv);
    states[k].resize(state_floats);
    ok = GdnOk(cudaMemcpy(h.data(), d.out[k], h.size() * sizeof(__half), cudaMemcpyDeviceToHost), "download") &&
         GdnOk(cudaMemcpy(states[k].data(), d.state[k], state_floats * sizeof(float), cudaMemcpyDeviceToHost),
               "download");
    outs[k].resize(h.size());
    for (size_t i = 0; i < h.size(); ++i) outs[k][i] = __half2float(h[i]);
    if (k >= kTimed) continue;
    // Timing: the median of 5 launches (each reads ~T * 64 KB of inputs, far past the L2 at 4096).
    std::vector<float> ms;
    for (int rep = 0; ok && rep < 5; ++rep) {
      ok = GdnOk(cudaEventRecord(a, nullptr), "event");
      ok = ok && run(k, nullptr).ok();
      ok = ok && GdnOk(cudaEventRecord(b, nullptr), "event") && GdnOk(cudaEventSynchronize(b), "event");
      float t = 0;
      ok = ok && GdnOk(cudaEventElapsedTime(&t, a, b), "event");
      ms.push_back(t);
    }
    if (!ok) break;
    std::sort(ms.begin(), ms.end());
    us[k] = ms[ms.size() / 2] * 1000.0;
  }
  if (ok) {
    for (int k = 1; k < kKernels; ++k) {  // TF32 output operands: 5e-3 (gdn_prefill_test.cc), the state ~f32
      const std::string what = "gdn prefill " + label + " " + names[k];
      Report(what + " out vs sequential", MaxRelative(outs[k], outs[0]), false, 5e-3);
      Report(what + " state vs sequential", MaxRelative(states[k], states[0]), false, 1e-4);
    }
    // The two stagings add the same products in the same order: the same bits (gdn.h kChunkedSmall).
    Report("gdn prefill " + label + " small == chunked (out)", MaxRelative(outs[2], outs[1]), false, 0.0);
    Report("gdn prefill " + label + " small == chunked (state)", MaxRelative(states[2], states[1]), false, 0.0);
    const double input_bytes = double(T) * (C + nv * dv + 2 * nv) * 4;
    for (int k = 0; k < kTimed; ++k) {
      const std::string name = "gdn prefill " + label + " " + names[k];
      std::printf("time %-40s %8.3f ms a layer, %.0f tok/s a layer (%.1fx the sequential kernel)\n", name.c_str(),
                  us[k] / 1e3, T / (us[k] * 1e-6), us[0] / us[k]);
      g_summary.push_back({name, input_bytes / (us[k] * 1e3), input_bytes / (us[k] * 1e-6) / g_copy_bw, us[k]});
    }
  }
  if (a != nullptr) cudaEventDestroy(a);
  if (b != nullptr) cudaEventDestroy(b);
  d.Free();
}

void CheckGdnPrefill(int T, std::mt19937& rng) {
  for (const int seqs : {1, 4, 8}) {
    if (T / seqs >= 64) CheckGdnPrefillSplit(T, seqs, rng);
  }
}

// Reports a failed status of the W4A4 path as a check failure (not an exit): true when ok.
bool ReportStatus(const std::string& what, const absl::Status& s) {
  if (s.ok()) return true;
  ++g_failures;
  std::printf("FAIL %-44s %s\n", what.c_str(), std::string(s.message()).c_str());
  return false;
}

// The W4A4 activation quantisation (any GPU): x [rows, in] f16 -> codes + scales, timed on copies
// of x rotated past the L2. Bandwidth counts 2 bytes read and 9/16 written per element.
void TimeActivationQuant(int rows, int in, std::mt19937& rng) {
  std::vector<double> unused;
  const std::vector<__half> x = MakeActivations(rows, in, rng, &unused);
  const size_t bytes = x.size() * 2 + sk::Nvfp4ActivationBytes(rows, in);
  const int copies = RotationCopies(x.size() * 2);
  std::vector<__half*> xs(copies);
  for (auto& p : xs) p = DeviceCopy(x);
  uint8_t* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, sk::Nvfp4ActivationBytes(rows, in)));
  const sk::Nvfp4Activations act{out, out + static_cast<size_t>(rows) * in / 2};
  const std::string name = "act quant " + std::to_string(rows) + "x" + std::to_string(in);
  if (ReportStatus(name, sk::QuantizeActivationsNvfp4(xs[0], rows, in, 448.f, act, nullptr))) {
    const double us = MedianMicros(
        [&](int i, cudaStream_t st) { (void)sk::QuantizeActivationsNvfp4(xs[i % copies], rows, in, 448.f, act, st); },
        copies * 4);
    CHECK_CUDA(cudaGetLastError());
    const double gbps = bytes / (us * 1e-6) / 1e9;
    std::printf("time %-40s %8.2f us %8.1f GB/s (%.0f%% of copy bw, graph replay)\n", name.c_str(), us, gbps,
                100.0 * gbps * 1e9 / g_copy_bw);
    g_summary.push_back({name, gbps, gbps * 1e9 / g_copy_bw, us});
  }
  for (auto* p : xs) cudaFree(p);
  cudaFree(out);
}

// The W4A4 GEMM (sm_120 / sm_121 only; its correctness is gpu_blackwell_test's): quantisation +
// GEMM + store for `rows` tokens, reported as TFLOP/s (2 * rows * out * in).
void TimeW4A4(int rows, int out, int in, std::mt19937& rng) {
  Nvfp4Host h = MakeNvfp4(out, in, rng);
  const sk::Nvfp4W4A4Layout layout = sk::RepackNvfp4ForW4A4(h.packed, h.scales, out, in);
  uint8_t* codes = DeviceCopy(layout.codes);
  uint8_t* scales = DeviceCopy(layout.scales);
  std::vector<double> unused;
  __half* x = DeviceCopy(MakeActivations(rows, in, rng, &unused));
  float* y = nullptr;
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc(&y, sizeof(float) * rows * out));
  CHECK_CUDA(cudaMalloc(&ws, sk::W4A4LinearWorkspaceBytes(out, in, rows)));
  const sk::Nvfp4W4A4LinearDevice w{codes, scales, h.global_scale, 448.f * 6.f / 4.f, out, in, nullptr};
  const std::string name = "w4a4 " + std::to_string(rows) + "x" + std::to_string(out) + "x" + std::to_string(in);
  if (ReportStatus(name, sk::Nvfp4W4A4Linear(w, x, rows, y, ws, nullptr))) {
    const double us =
        MedianMicros([&](int, cudaStream_t st) { (void)sk::Nvfp4W4A4Linear(w, x, rows, y, ws, st); }, 4);
    CHECK_CUDA(cudaGetLastError());
    const double tflops = 2.0 * rows * out * in / (us * 1e-6) / 1e12;
    std::printf("time %-40s %8.2f us %8.1f TFLOP/s (quantise + GEMM + store, graph replay)\n", name.c_str(), us, tflops);
    g_summary.push_back({name, 0, 0, us, tflops});
  }
  cudaFree(codes);
  cudaFree(scales);
  cudaFree(x);
  cudaFree(y);
  cudaFree(ws);
}


}  // namespace kernel_check
