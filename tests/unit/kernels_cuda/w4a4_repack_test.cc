// The W4A4 weight repack (kernels/cuda/w4a4_linear.h RepackNvfp4ForW4A4) unpacked with the PTX
// ISA's documented fragment layout of mma.m16n8k64 .e2m1 matrix A ("row = groupID for a_i with
// 0 <= i < 8 || 16 <= i < 24, groupID + 8 otherwise; col = threadID_in_group * 8 + (i & 7), + 32 for
// i >= 16") and CUTLASS's scale-factor layout for SM120_16x8x64_TN_VS (SFALayout
// ((2,2,8),64):((8,0,1),16): lane bit 0 picks rows +8, lane bit 1 is a broadcast, lane / 4 the
// row), plus the CPU emulation of the whole W4A4 linear against the project's QDQ reference.
// No GPU needed.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/w4a4_linear.h"
#include "quant/activation_quant.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "tests/gpu/w4a4_reference.h"

namespace sparkserve::kernels::cuda {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(W4A4RepackTest, UnpacksToTheWeightThroughThePtxFragmentLayout) {
  std::mt19937 rng(7);
  const int shapes[][2] = {{16, 64}, {1, 64}, {40, 128}, {200, 2560}, {33, 192}};
  for (const auto& [out, in] : shapes) {
    SCOPED_TRACE(testing::Message() << "out " << out << " in " << in);
    const std::vector<uint8_t> packed = RandomBytes(static_cast<size_t>(out) * in / 2, rng);
    const std::vector<uint8_t> scales = RandomBytes(static_cast<size_t>(out) * in / 16, rng);
    const Nvfp4W4A4Layout l = RepackNvfp4ForW4A4(packed, scales, out, in);
    const int tiles = (out + 15) / 16, steps = in / 64;
    ASSERT_EQ(l.codes.size(), static_cast<size_t>(tiles) * steps * 512);
    ASSERT_EQ(l.scales.size(), static_cast<size_t>(tiles) * steps * 64);
    EXPECT_EQ(l.codes.size() + l.scales.size(), static_cast<size_t>(tiles) * 16 * in * 9 / 16);  // the header's figure
    // Every (row, k) of the padded weight, reconstructed from the fragments; -1 = never written.
    std::vector<int> nibble(static_cast<size_t>(tiles) * 16 * in, -1), scale(static_cast<size_t>(tiles) * 16 * in / 16, -1);
    for (int tile = 0; tile < tiles; ++tile) {
      for (int s = 0; s < steps; ++s) {
        const size_t block = static_cast<size_t>(tile) * steps + s;
        for (int lane = 0; lane < 32; ++lane) {
          const int group_id = lane >> 2, thread_in_group = lane % 4;
          for (int i = 0; i < 32; ++i) {  // a_i: 8 per .b32 register, low nibble first
            const int row = (i < 8 || (i >= 16 && i < 24)) ? group_id : group_id + 8;
            const int col = thread_in_group * 8 + (i & 7) + (i >= 16 ? 32 : 0);
            const uint8_t byte = l.codes[block * 512 + 16 * lane + i / 2];
            const int v = (i % 2) ? byte >> 4 : byte & 0xf;
            int& dst = nibble[static_cast<size_t>(tile * 16 + row) * in + s * 64 + col];
            EXPECT_EQ(dst, -1) << "written twice";
            dst = v;
          }
          // scale-a-data of this lane (thread-id-a 0): row 8 * (lane & 1) + lane / 4, byte v = K 16v..
          const int row = 8 * (lane & 1) + lane / 4;
          for (int v = 0; v < 4; ++v) {
            int& dst = scale[static_cast<size_t>(tile * 16 + row) * (in / 16) + s * 4 + v];
            const int got = l.scales[block * 64 + 4 * row + v];
            EXPECT_TRUE(dst == -1 || dst == got) << "lanes disagree on a scale";
            dst = got;
          }
        }
      }
    }
    for (int row = 0; row < tiles * 16; ++row) {
      for (int k = 0; k < in; ++k) {
        const uint8_t b = row < out ? packed[static_cast<size_t>(row) * in / 2 + k / 2] : 0;
        const int want = row < out ? ((k % 2) ? b >> 4 : b & 0xf) : 0;
        ASSERT_EQ(nibble[static_cast<size_t>(row) * in + k], want) << "row " << row << " k " << k;
      }
      for (int gi = 0; gi < in / 16; ++gi) {
        const int want = row < out ? scales[static_cast<size_t>(row) * (in / 16) + gi] : 0;
        ASSERT_EQ(scale[static_cast<size_t>(row) * (in / 16) + gi], want) << "row " << row << " group " << gi;
      }
    }
  }
}

// The emulation's sum equals the project's QDQ reference (FakeQuantizeNvfp4Rows) times the
// weight's dequantisation, accumulated independently.
TEST(W4A4EmulationTest, MatchesFakeQuantisedActivationsTimesDequantisedWeights) {
  std::mt19937 rng(8);
  for (const auto& [rows, out, in, parts] : {std::tuple{3, 48, 128, 1}, {17, 40, 256, 2}, {5, 96, 512, 3}}) {
    const gpu_test::Nvfp4Weight w = gpu_test::RandomNvfp4Weight(out, in, rng, parts);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(rows) * in);
    for (float& v : x) v = normal(rng);
    x[5] = 0.f;
    const float input_gs = 448.f * 6.f / 4.f;  // calibrated for |x| up to 4: larger values clip
    const std::vector<double> got = gpu_test::EmulateW4A4Linear(w, x, rows, input_gs, gpu_test::SampledColumns(out, 1));
    std::vector<float> xq(x.size());
    quant::FakeQuantizeNvfp4Rows(x.data(), rows, in, input_gs, xq.data());
    double max_err = 0, max_ref = 0;
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < out; ++o) {
        double want = 0;
        for (int k = 0; k < in; ++k) {
          const uint8_t b = w.packed[(static_cast<size_t>(o) * in + k) / 2];
          const float wk = quant::E2M1ToF32(static_cast<uint8_t>(k % 2 ? b >> 4 : b & 0xf)) *
                           quant::E4M3ToF32(w.scales[static_cast<size_t>(o) * in / 16 + k / 16]) /
                           w.row_global_scale[static_cast<size_t>(o)];
          want += static_cast<double>(xq[static_cast<size_t>(r) * in + k]) * wk;
        }
        max_err = std::max(max_err, std::abs(got[static_cast<size_t>(r) * out + o] - want));
        max_ref = std::max(max_ref, std::abs(want));
      }
    }
    EXPECT_GT(max_ref, 0.0);
    EXPECT_LE(max_err, 1e-6 * max_ref) << "rows " << rows << " out " << out << " in " << in;
  }
}

}  // namespace
}  // namespace sparkserve::kernels::cuda
