// gpu_kernel_check: every CUDA kernel against the CPU reference on fresh random inputs (outputs
// poisoned first), then timed on weights rotated through more memory than the L2 holds. Prints one
// line per check and per timing, and a summary table last. Exit code 1 when any check fails.
#include "tests/gpu/kernel_check_util.h"

namespace kernel_check {
namespace {

void CheckNvfp4(int out, int in, std::mt19937& rng, bool time_it) {
  Nvfp4Host h = MakeNvfp4(out, in, rng);
  const sk::Nvfp4DecodeLayout layout = sk::RepackNvfp4ForDecode(h.packed, h.scales, out, in);
  const std::vector<uint8_t>& repacked = layout.packed;
  uint8_t* d_packed = DeviceCopy(layout.packed);
  uint8_t* d_scales = DeviceCopy(layout.scales);
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc(&ws, sk::DecodeLinearWorkspaceBytes(out, in, sk::kMaxDecodeRows)));
  sk::Nvfp4LinearDevice w{d_packed, d_scales, h.global_scale, out, in};
  for (int rows : {1, 3, 8}) {
    std::vector<double> xe;
    std::vector<__half> x = MakeActivations(rows, in, rng, &xe);
    __half* d_x = DeviceCopy(x);
    float* d_y = nullptr;
    CHECK_CUDA(cudaMalloc(&d_y, sizeof(float) * rows * out));
    CHECK_CUDA(cudaMemset(d_y, 0xff, sizeof(float) * rows * out));  // NaN poison
    CHECK_OK(sk::Nvfp4DecodeLinear(w, d_x, rows, d_y, ws, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> y(static_cast<size_t>(rows) * out);
    CHECK_CUDA(cudaMemcpy(y.data(), d_y, y.size() * 4, cudaMemcpyDeviceToHost));
    bool nan = false;
    const double err = RelativeError(y, Reference(h.dequant, xe, rows, out, in), &nan);
    Report("nvfp4 decode " + std::to_string(out) + "x" + std::to_string(in) + " rows " + std::to_string(rows), err, nan,
           1e-4);
    if (time_it && (rows == 1 || rows == 8)) {
      const size_t bytes = repacked.size() + layout.scales.size();
      const int copies = RotationCopies(bytes);
      std::vector<uint8_t*> packs(copies), scs(copies);
      for (int c = 0; c < copies; ++c) {
        CHECK_CUDA(cudaMalloc(&packs[c], repacked.size()));
        CHECK_CUDA(cudaMemcpy(packs[c], d_packed, repacked.size(), cudaMemcpyDeviceToDevice));
        CHECK_CUDA(cudaMalloc(&scs[c], layout.scales.size()));
        CHECK_CUDA(cudaMemcpy(scs[c], d_scales, layout.scales.size(), cudaMemcpyDeviceToDevice));
      }
      const double us = MedianMicros(
          [&](int i, cudaStream_t st) {
            sk::Nvfp4LinearDevice wc{packs[i % copies], scs[i % copies], h.global_scale, out, in};
            CHECK_OK(sk::Nvfp4DecodeLinear(wc, d_x, rows, d_y, ws, st));
          },
          copies * 4);
      CHECK_CUDA(cudaGetLastError());
      const double gbps = bytes / (us * 1e-6) / 1e9;
      const std::string name = "nvfp4 " + std::to_string(out) + "x" + std::to_string(in) + " b" + std::to_string(rows);
      std::printf("time %-40s %8.2f us %8.1f GB/s (%.0f%% of copy bw, graph replay)\n", name.c_str(), us, gbps,
                  100.0 * gbps * 1e9 / g_copy_bw);
      g_summary.push_back({name, gbps, gbps * 1e9 / g_copy_bw, us});
      for (int c = 0; c < copies; ++c) {
        cudaFree(packs[c]);
        cudaFree(scs[c]);
      }
    }
    cudaFree(d_x);
    cudaFree(d_y);
  }
  cudaFree(d_packed);
  cudaFree(d_scales);
  cudaFree(ws);
}

void CheckFp8(int out, int in, std::mt19937& rng, bool time_it) {
  Fp8Host h = MakeFp8(out, in, rng);
  const std::vector<uint8_t> repacked = sk::RepackFp8ForDecode(h.weight, out, in);
  uint8_t* d_w = DeviceCopy(repacked);
  float* d_s = DeviceCopy(h.scales);
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc(&ws, sk::DecodeLinearWorkspaceBytes(out, in, sk::kMaxDecodeRows)));
  for (int rows : {1, 5, 8}) {
    std::vector<double> xe;
    std::vector<__half> x = MakeActivations(rows, in, rng, &xe);
    __half* d_x = DeviceCopy(x);
    float* d_y = nullptr;
    CHECK_CUDA(cudaMalloc(&d_y, sizeof(float) * rows * out));
    CHECK_CUDA(cudaMemset(d_y, 0xff, sizeof(float) * rows * out));
    sk::Fp8LinearDevice w{d_w, d_s, out, in};
    CHECK_OK(sk::Fp8DecodeLinear(w, d_x, rows, d_y, ws, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> y(static_cast<size_t>(rows) * out);
    CHECK_CUDA(cudaMemcpy(y.data(), d_y, y.size() * 4, cudaMemcpyDeviceToHost));
    bool nan = false;
    const double err = RelativeError(y, Reference(h.dequant, xe, rows, out, in), &nan);
    Report("fp8 decode " + std::to_string(out) + "x" + std::to_string(in) + " rows " + std::to_string(rows), err, nan,
           1e-4);
    if (time_it && (rows == 1 || rows == 8)) {
      const size_t bytes = repacked.size() + h.scales.size() * 4;
      const int copies = RotationCopies(bytes);
      std::vector<uint8_t*> ws_copies(copies);
      for (int c = 0; c < copies; ++c) {
        CHECK_CUDA(cudaMalloc(&ws_copies[c], repacked.size()));
        CHECK_CUDA(cudaMemcpy(ws_copies[c], d_w, repacked.size(), cudaMemcpyDeviceToDevice));
      }
      const double us = MedianMicros(
          [&](int i, cudaStream_t st) {
            sk::Fp8LinearDevice wc{ws_copies[i % copies], d_s, out, in};
            CHECK_OK(sk::Fp8DecodeLinear(wc, d_x, rows, d_y, ws, st));
          },
          copies * 4);
      CHECK_CUDA(cudaGetLastError());
      const double gbps = bytes / (us * 1e-6) / 1e9;
      const std::string name = "fp8 " + std::to_string(out) + "x" + std::to_string(in) + " b" + std::to_string(rows);
      std::printf("time %-40s %8.2f us %8.1f GB/s (%.0f%% of copy bw, graph replay)\n", name.c_str(), us, gbps,
                  100.0 * gbps * 1e9 / g_copy_bw);
      g_summary.push_back({name, gbps, gbps * 1e9 / g_copy_bw, us});
      for (auto* p : ws_copies) cudaFree(p);
    }
    cudaFree(d_x);
    cudaFree(d_y);
  }
  cudaFree(d_w);
  cudaFree(d_s);
  cudaFree(ws);
}

// GDN decode at the 4B's shape (nk 16, nv 32, dk = dv = 128; 1 token a seq): the decode kernel
// against the sequential one on the same inputs (they agree to f32 rounding), then both timed over
// state copies rotated past the L2. One launch reads + writes seqs x 2 MiB of state: GB/s counts
// both, as the copy bandwidth does.
void CheckGdnDecode(int seqs, std::mt19937& rng) {
  constexpr int nk = 16, nv = 32, dk = 128, dv = 128, C = 2 * nk * dk + nv * dv;
  const sk::GdnShape shape{nk, nv, dk, dv};
  const size_t state_floats = size_t(seqs) * nv * dk * dv, state_bytes = state_floats * sizeof(float);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto random = [&](size_t n, float scale, float offset) {
    std::vector<float> v(n);
    for (auto& x : v) x = offset + scale * uni(rng);
    return v;
  };
  float* mixed = DeviceCopy(random(size_t(seqs) * C, 1.f, 0.f));
  float* ab = DeviceCopy(random(size_t(seqs) * 2 * nv, 1.f, 0.f));
  float* z = DeviceCopy(random(size_t(seqs) * nv * dv, 1.f, 0.f));
  float* a_log = DeviceCopy(random(nv, 0.5f, 0.f));
  float* dt_bias = DeviceCopy(random(nv, 0.5f, 0.f));
  float* norm_w = DeviceCopy(random(dv, 0.1f, 1.f));
  std::vector<int32_t> meta(3 * size_t(seqs) + 1);  // token_begin [seqs + 1], start_pos [seqs], slots [seqs]
  for (int s = 0; s <= seqs; ++s) meta[s] = s;
  for (int s = 0; s < seqs; ++s) {
    meta[seqs + 1 + s] = 100 + s;
    meta[2 * seqs + 1 + s] = s;
  }
  int32_t* d_meta = DeviceCopy(meta);
  sk::RaggedBatchDevice batch;
  batch.num_seqs = seqs;
  batch.num_tokens = seqs;
  batch.max_seq_tokens = 1;
  batch.token_begin = d_meta;
  batch.start_pos = d_meta + seqs + 1;
  batch.slots = d_meta + 2 * seqs + 1;
  const sk::GdnInput in{mixed, C, ab, ab + nv, 2 * nv, z, nv * dv};
  const std::vector<float> state0 = random(state_floats, 0.3f, 0.f);
  const sk::GdnKernel kernels[2] = {sk::GdnKernel::kSequential, sk::GdnKernel::kDecode};
  const char* names[2] = {"sequential", "decode"};
  float* states[2] = {nullptr, nullptr};
  __half* outs[2] = {nullptr, nullptr};
  std::vector<float*> rotated;
  auto free_all = [&] {
    for (float* q : rotated) cudaFree(q);
    for (int k = 0; k < 2; ++k) {
      cudaFree(states[k]);
      cudaFree(outs[k]);
    }
    for (float* q : {mixed, ab, z, a_log, dt_bias, norm_w}) cudaFree(q);
    cudaFree(d_meta);
  };
  std::vector<float> got_state[2], got_out[2];
  for (int k = 0; k < 2; ++k) {
    states[k] = DeviceCopy(state0);
    CHECK_CUDA(cudaMalloc(&outs[k], size_t(seqs) * nv * dv * sizeof(__half)));
    CHECK_CUDA(cudaMemset(outs[k], 0xff, size_t(seqs) * nv * dv * sizeof(__half)));  // NaN poison
    const absl::Status st = sk::GatedDeltaNetWith(kernels[k], in, shape, a_log, dt_bias, norm_w, 1e-6f, batch,
                                                  states[k], nullptr, 0, outs[k], nullptr);
    const cudaError_t e = cudaDeviceSynchronize();
    if (!st.ok() || e != cudaSuccess) {
      ++g_failures;
      std::printf("FAIL gdn decode b%d %s: %s %s\n", seqs, names[k], std::string(st.message()).c_str(),
                  cudaGetErrorString(e));
      free_all();
      return;  // reported; the tool goes on
    }
    got_state[k].resize(state_floats);
    CHECK_CUDA(cudaMemcpy(got_state[k].data(), states[k], state_bytes, cudaMemcpyDeviceToHost));
    std::vector<__half> h(size_t(seqs) * nv * dv);
    CHECK_CUDA(cudaMemcpy(h.data(), outs[k], h.size() * sizeof(__half), cudaMemcpyDeviceToHost));
    got_out[k].resize(h.size());
    for (size_t i = 0; i < h.size(); ++i) got_out[k][i] = __half2float(h[i]);
  }
  auto compare = [&](const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                     double tol) {
    bool nan = false;
    const double err = RelativeError(got, std::vector<double>(want.begin(), want.end()), &nan);
    Report("gdn decode b" + std::to_string(seqs) + " vs sequential: " + what, err, nan, tol);
  };
  compare(got_state[1], got_state[0], "state", 1e-5);
  compare(got_out[1], got_out[0], "out (f16)", 1e-3);

  const int copies = RotationCopies(state_bytes);
  rotated.resize(copies);
  for (int c = 0; c < copies; ++c) {
    CHECK_CUDA(cudaMalloc(&rotated[c], state_bytes));
    CHECK_CUDA(cudaMemcpy(rotated[c], states[0], state_bytes, cudaMemcpyDeviceToDevice));
  }
  double us[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    us[k] = MedianMicros(
        [&](int i, cudaStream_t st) {
          CHECK_OK(sk::GatedDeltaNetWith(kernels[k], in, shape, a_log, dt_bias, norm_w, 1e-6f, batch,
                                         rotated[i % copies], nullptr, 0, outs[k], st));
        },
        copies * 4);
    CHECK_CUDA(cudaGetLastError());
    const double gbps = 2.0 * state_bytes / (us[k] * 1e-6) / 1e9;
    const std::string name = std::string("gdn decode b") + std::to_string(seqs) + " " + names[k];
    std::printf("time %-40s %8.2f us %8.1f GB/s of state (%.0f%% of copy bw, graph replay)\n", name.c_str(), us[k],
                gbps, 100.0 * gbps * 1e9 / g_copy_bw);
    g_summary.push_back({name, gbps, gbps * 1e9 / g_copy_bw, us[k]});
  }
  free_all();
}

}  // namespace
}  // namespace kernel_check

using namespace kernel_check;  // NOLINT(google-build-using-namespace): this tool's own helpers

// The 4B's linears at batched-decode (16..64 rows: weight GB/s) and prefill (256, 4096 rows:
// TFLOP/s) row counts on the GEMM the device picks, (sm_90a) the mma.sync kernel beside it, and the
// skinny kernel (what CudaLinear runs for 9..32 rows, and up to 64 without wgmma).
void TimeManyRowLinears(std::mt19937& rng) {
  for (const ManyRowKernel k : {ManyRowKernel::kGemm, ManyRowKernel::kGemmMma}) {
    if (k == ManyRowKernel::kGemmMma && !sk::DeviceRunsWgmma()) continue;  // kGemm ran it already
    CheckGemm(true, 18432, 2560, rng, {16, 32, 64, 256, 4096}, k);  // MLP gate + up
    CheckGemm(false, 18432, 2560, rng, {64, 4096}, k);
    CheckGemm(true, 2560, 9216, rng, {64, 4096}, k);  // MLP down
    CheckGemm(false, 12288, 2560, rng, {64, 4096}, k);  // GDN in_proj_qkvz
    CheckGemm(false, 2560, 4096, rng, {64, 4096}, k);   // GDN out_proj
    CheckGemm(true, 8192, 2560, rng, {64, 4096}, k);    // q_proj with gate
    CheckGemm(false, 248320 / 4, 2560, rng, {64}, k);  // a quarter of the lm_head
  }
  CheckGemm(true, 18432, 2560, rng, {16, 32, 64}, ManyRowKernel::kSkinny);
  CheckGemm(false, 18432, 2560, rng, {16, 32, 64}, ManyRowKernel::kSkinny);
  CheckGemm(true, 2560, 9216, rng, {16, 32, 64}, ManyRowKernel::kSkinny);
  CheckGemm(true, 8192, 2560, rng, {64}, ManyRowKernel::kSkinny);  // q_proj with gate
  CheckGemm(false, 12288, 2560, rng, {16, 32, 64}, ManyRowKernel::kSkinny);
  CheckGemm(false, 2560, 4096, rng, {64}, ManyRowKernel::kSkinny);
  CheckGemm(false, 248320 / 4, 2560, rng, {64}, ManyRowKernel::kSkinny);  // a quarter of the lm_head
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool quick = mode == "--quick";
  if (mode == "--profile") {  // one launch of each large kernel, for ncu
    std::mt19937 rng(1);
    CheckNvfp4(18432, 2560, rng, false);
    CheckFp8(62080, 2560, rng, false);
    TimeAttentionDecode(64, 1024, false, rng, false);
    return g_failures == 0 ? 0 : 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs, %.0f MB L2)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, prop.l2CacheSize / 1e6);
  auto bw = sk::MeasureCopyBandwidth();
  CHECK_OK(bw.status());
  g_copy_bw = bw->bytes_per_second;
  std::printf("copy bandwidth: %.0f GB/s (1 GiB device-to-device, read + write, median of 20)\n", g_copy_bw / 1e9);

  std::mt19937 rng(std::random_device{}());
  if (mode == "--gemm") {  // only the many-row linears (GEMM kernels, skinny)
    TimeManyRowLinears(rng);
    std::printf("checks failed: %d\n", g_failures);
    return g_failures == 0 ? 0 : 1;
  }
  if (mode == "--gdn-prefill") {  // only the GDN prefill rows (chunked: large / small staging, sequential)
    CheckGdnPrefill(4096, rng);
    CheckGdnPrefill(512, rng);
    std::printf("checks failed: %d\n", g_failures);
    return g_failures == 0 ? 0 : 1;
  }
  // Correctness on odd small shapes, then the 4B's decode shapes (timed).
  CheckNvfp4(48, 256, rng, false);
  CheckNvfp4(16, 128, rng, false);
  CheckNvfp4(40, 384, rng, false);  // a partial last tile
  CheckFp8(48, 192, rng, false);
  CheckFp8(24, 64, rng, false);
  for (const ManyRowKernel k : {ManyRowKernel::kGemm, ManyRowKernel::kGemmMma}) {
    CheckGemm(true, 200, 1024, rng, {9, 100, 300}, k);  // K splits, a partial weight block
    CheckGemm(false, 40, 192, rng, {33, 65}, k);
  }
  CheckGemm(true, 200, 1024, rng, {9, 33, 64}, ManyRowKernel::kSkinny);  // stream-K pieces of one column block
  CheckGemm(false, 4200, 640, rng, {16, 64}, ManyRowKernel::kSkinny);    // ranges straddling column blocks
  for (const bool fp8 : {false, true}) TimeAttentionDecode(5, 777, fp8, rng, false);
  if (!quick) {
    CheckNvfp4(2560, 2560, rng, true);   // attention o_proj-like (in 4096 on the 4B) / square
    CheckNvfp4(8192, 2560, rng, true);   // q_proj with gate (16 heads x 2 x 256)
    CheckNvfp4(18432, 2560, rng, true);  // MLP gate + up
    CheckNvfp4(2560, 9216, rng, true);   // MLP down
    CheckFp8(12288, 2560, rng, true);    // GDN in_proj_qkv + z (8192 + 4096)
    CheckFp8(2560, 4096, rng, true);     // GDN out_proj
    CheckFp8(248320 / 4, 2560, rng, true);  // a quarter of the lm_head
    for (int seqs : {1, 8, 64}) CheckGdnDecode(seqs, rng);  // GDN decode of one 4B layer: decode vs sequential
    CheckGdnPrefill(4096, rng);             // GDN prefill of one 4B layer: chunked vs sequential
    CheckGdnPrefill(512, rng);
    TimeManyRowLinears(rng);
    for (const bool fp8 : {false, true}) {  // attention decode of one 4B layer: 1 x 8K, 8 x 8K, 64 x 1K
      TimeAttentionDecode(1, 8192, fp8, rng, true);
      TimeAttentionDecode(8, 8192, fp8, rng, true);
      TimeAttentionDecode(64, 1024, fp8, rng, true);
    }
    TimeActivationQuant(4096, 2560, rng);    // W4A4 prefill inputs: hidden
    TimeActivationQuant(4096, 9216, rng);    // MLP down's input
    if (sk::W4A4LinearSupportedOnCurrentDevice()) {  // UNTESTED kernel: timings only where it exists
      TimeW4A4(4096, 18432, 2560, rng);  // MLP gate + up
      TimeW4A4(4096, 2560, 9216, rng);   // MLP down
      TimeW4A4(4096, 8192, 2560, rng);   // q_proj with gate
      TimeW4A4(512, 2560, 4096, rng);    // o_proj, one chunk
    }
  }
  std::printf("\n%-28s %10s %10s %8s %8s\n", "kernel", "us", "GB/s", "of copy", "TFLOP/s");
  for (const auto& s : g_summary) {
    std::printf("%-28s %10.2f %10.1f %7.0f%% %8.1f\n", s.name.c_str(), s.us, s.gbps, 100 * s.ratio, s.tflops);
  }
  std::printf("checks failed: %d\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
