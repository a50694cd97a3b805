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

}  // namespace
}  // namespace kernel_check

using namespace kernel_check;  // NOLINT(google-build-using-namespace): this tool's own helpers

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
  // Correctness on odd small shapes, then the 4B's decode shapes (timed).
  CheckNvfp4(48, 256, rng, false);
  CheckNvfp4(16, 128, rng, false);
  CheckNvfp4(40, 384, rng, false);  // a partial last tile
  CheckFp8(48, 192, rng, false);
  CheckFp8(24, 64, rng, false);
  CheckGemm(true, 200, 1024, rng, {9, 100});  // K splits, a partial weight block
  CheckGemm(false, 40, 192, rng, {33});
  for (const bool fp8 : {false, true}) TimeAttentionDecode(5, 777, fp8, rng, false);
  if (!quick) {
    CheckNvfp4(2560, 2560, rng, true);   // attention o_proj-like (in 4096 on the 4B) / square
    CheckNvfp4(8192, 2560, rng, true);   // q_proj with gate (16 heads x 2 x 256)
    CheckNvfp4(18432, 2560, rng, true);  // MLP gate + up
    CheckNvfp4(2560, 9216, rng, true);   // MLP down
    CheckFp8(12288, 2560, rng, true);    // GDN in_proj_qkv + z (8192 + 4096)
    CheckFp8(2560, 4096, rng, true);     // GDN out_proj
    CheckFp8(248320 / 4, 2560, rng, true);  // a quarter of the lm_head
    CheckGdnPrefill(4096, rng);             // GDN prefill of one 4B layer: chunked vs sequential
    CheckGdnPrefill(512, rng);
    // Batched decode (16, 64 rows: weight GB/s) and prefill (256, 4096 rows: TFLOP/s) on the GEMM.
    CheckGemm(true, 18432, 2560, rng, {16, 64, 256, 4096});   // MLP gate + up
    CheckGemm(false, 18432, 2560, rng, {16, 64, 256, 4096});
    CheckGemm(true, 2560, 9216, rng, {64, 4096});             // MLP down
    CheckGemm(false, 12288, 2560, rng, {64, 4096});           // GDN in_proj_qkvz
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
