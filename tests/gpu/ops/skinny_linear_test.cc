// GPU skinny linear (kernels/cuda/skinny_linear.h, 9..64 rows) against the CPU reference in double
// on the exact dequantised weights (linear_test_util.h): NVFP4 (with the per-row divisors of fused
// parts) and per-channel FP8, rows 1..64 (every 8-row tile count, partial last tiles), the 4B's
// shapes (stream-K ranges crossing column blocks, many partial planes) and small odd ones (partial
// weight tiles and column blocks, one K step, fewer units than blocks), all three epilogues,
// NaN-poisoned outputs; the switch between the decode GEMV, this kernel and the GEMM at the row
// thresholds (+-1); the stream-K plan (every output plane written exactly once); the workspace
// bound; bad arguments.
#include "kernels/cuda/skinny_linear.h"

#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/skinny_linear_kernels.h"
#include "tests/gpu/ops/linear_test_util.h"

namespace sparkserve::gpu_test {
namespace {

using namespace linear_test;  // NOLINT(google-build-using-namespace): the shared checks

constexpr LinearPath kPath = LinearPath::kSkinny;
const std::vector<int> kRows = {1, 8, 9, 16, 17, 24, 33, 40, 57, 63, 64};

TEST(SkinnyLinearTest, Nvfp4SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice()) << "no CUDA device: the GPU suite needs one";
  std::mt19937 rng(201);
  CheckStore(kPath, MakeNvfp4({40}, 128, rng), kRows, 1);            // partial tile, one K step, one unit
  CheckStore(kPath, MakeNvfp4({120, 80}, 256, rng), kRows, 2);       // fused parts, per-row divisors
  CheckStore(kPath, MakeNvfp4({24}, 1024, rng), {9, 17, 64}, 3);      // one column block, 8 pieces
  CheckStore(kPath, MakeNvfp4({300}, 1280, rng), {9, 33, 64}, 4);    // 2 column blocks, the 2nd partial
  CheckStore(kPath, MakeNvfp4({4200}, 1280, rng), {16, 40, 64}, 5);  // 17 column blocks: ranges straddle them
}

TEST(SkinnyLinearTest, Fp8SmallOddShapes) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(202);
  CheckStore(kPath, MakeFp8(24, 64, rng), kRows, 6);
  CheckStore(kPath, MakeFp8(40, 192, rng), kRows, 7);
  CheckStore(kPath, MakeFp8(200, 1024, rng), {9, 17, 64}, 8);
  CheckStore(kPath, MakeFp8(4200, 640, rng), {16, 40, 64}, 9);
}

TEST(SkinnyLinearTest, Nvfp4ShapesOf4B) {  // fused gate|up (two global scales) and down
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(203);
  CheckStore(kPath, MakeNvfp4({9216, 9216}, 2560, rng), {9, 16, 17, 33, 64}, 10);
  CheckStore(kPath, MakeNvfp4({2560}, 9216, rng), {9, 16, 33, 64}, 11);
}

TEST(SkinnyLinearTest, Fp8ShapesOf4B) {  // GDN in_proj_qkvz and out_proj
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(204);
  CheckStore(kPath, MakeFp8(12288, 2560, rng), {9, 16, 17, 33, 64}, 12);
  CheckStore(kPath, MakeFp8(2560, 4096, rng), {9, 32, 64}, 13);
}

TEST(SkinnyLinearTest, SwiGluEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(205);
  CheckSwiGlu(kPath, MakeNvfp4({9216, 9216}, 2560, rng), {9, 33, 64}, 14);
  CheckSwiGlu(kPath, MakeFp8(200, 256, rng), {9, 17, 64}, 15);  // F = 100: gate and up share a weight tile
  CheckSwiGlu(kPath, MakeNvfp4({136, 136}, 384, rng), {16, 41}, 16);
}

TEST(SkinnyLinearTest, AddRmsNormEpilogue) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(206);
  CheckAddRmsNorm(kPath, MakeFp8(2560, 4096, rng), {9, 64}, 17);  // GDN out_proj of the 4B
  CheckAddRmsNorm(kPath, MakeNvfp4({200}, 256, rng), {16, 33}, 18);
  CheckAddRmsNorm(kPath, MakeNvfp4({2560}, 9216, rng), {24}, 19);  // MLP down of the 4B
}

// The decode GEMV on the same checks (its rows 1..8), then the row thresholds as CudaLinear::Run
// picks the kernel: 8 | 9 (decode | skinny) and 64 | 65 (skinny | GEMM), every epilogue.
TEST(SkinnyLinearTest, DecodeAndThresholdNeighbours) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(207);
  CheckStore(LinearPath::kDecode, MakeNvfp4({120, 80}, 256, rng), {1, 3, 8}, 20);
  CheckStore(LinearPath::kDecode, MakeFp8(200, 1024, rng), {1, 5, 8}, 21);
  const std::vector<int> around = {7, 8, 9, 63, 64, 65};
  CheckStore(LinearPath::kByRows, MakeNvfp4({120, 80}, 256, rng), around, 22);
  CheckStore(LinearPath::kByRows, MakeFp8(200, 1024, rng), around, 23);
  CheckSwiGlu(LinearPath::kByRows, MakeNvfp4({136, 136}, 384, rng), around, 24);
  CheckAddRmsNorm(LinearPath::kByRows, MakeFp8(640, 512, rng), around, 25);
}

// The stream-K plan: grid <= units, every block owns >= 1 unit, and every (column block, plane)
// pair is written exactly once (pieces in planes 0..k-1 by the blocks covering the column block in
// order, zeros in k..planes-1 by the block holding its last unit) — the invariant SplitSum needs.
TEST(SkinnyLinearTest, PlanWritesEveryPlaneOnce) {
  ASSERT_TRUE(HasCudaDevice());
  for (const bool nvfp4 : {true, false}) {
    for (const auto& [out, in] : std::vector<std::pair<int, int>>{
             {40, 128}, {300, 1280}, {4200, 1280}, {18432, 2560}, {2560, 9216}, {12288, 2560}, {62080, 2560}, {24, 1024}}) {
      for (const int rows : {1, 9, 16, 33, 64}) {
        const kc::SkinnyPlan p = kc::PlanSkinny(nvfp4, rows, out, in);
        const std::string what = std::string(nvfp4 ? "nvfp4 " : "fp8 ") + std::to_string(out) + "x" + std::to_string(in) +
                                 " rows " + std::to_string(rows);
        ASSERT_EQ(p.n_tiles, (rows + 7) / 8) << what;
        ASSERT_EQ(p.units, static_cast<int64_t>(p.col_blocks) * p.steps) << what;
        ASSERT_GE(p.grid, 1) << what;
        ASSERT_LE(p.grid, p.units) << what;
        ASSERT_GE(p.stages, 2) << what;
        ASSERT_LE(p.stages, 5) << what;
        ASSERT_EQ(p.smem, p.stages * p.stage_bytes) << what;
        std::vector<int> writes(static_cast<size_t>(p.col_blocks) * p.planes, 0);
        for (int64_t b = 0; b < p.grid; ++b) {
          const int64_t u0 = kc::StreamKUnitBegin(b, p.units, p.grid), u1 = kc::StreamKUnitBegin(b + 1, p.units, p.grid);
          ASSERT_LT(u0, u1) << what << " block " << b << " owns no unit";
          for (int64_t u = u0; u < u1; ++u) {  // as the kernel walks its range
            ASSERT_EQ(kc::StreamKBlockOfUnit(u, p.units, p.grid), b) << what << " unit " << u;
            const bool col_end = u % p.steps == p.steps - 1;
            if (!col_end && u != u1 - 1) continue;
            const int64_t c = u / p.steps;
            const int64_t piece = b - kc::StreamKBlockOfUnit(c * p.steps, p.units, p.grid);
            ASSERT_GE(piece, 0) << what;
            ASSERT_LT(piece, p.planes) << what << " column block " << c;
            ++writes[c * p.planes + piece];
            if (col_end) {
              for (int64_t q = piece + 1; q < p.planes; ++q) ++writes[c * p.planes + q];
            }
          }
        }
        for (size_t i = 0; i < writes.size(); ++i) {
          ASSERT_EQ(writes[i], 1) << what << ": column block " << i / p.planes << " plane " << i % p.planes;
        }
      }
    }
  }
}

TEST(SkinnyLinearTest, WorkspaceCoversEverySmallerCall) {
  ASSERT_TRUE(HasCudaDevice());
  for (const auto& [out, in] : std::vector<std::pair<int, int>>{{40, 128}, {2560, 9216}, {18432, 2560}, {200, 4096}}) {
    size_t prev = 0;
    for (int rows = 1; rows <= kc::kMaxSkinnyRows; ++rows) {
      const size_t b = kc::SkinnyLinearWorkspaceBytes(out, in, rows);
      ASSERT_GE(b, prev) << out << "x" << in << " rows " << rows;
      for (const bool nvfp4 : {true, false}) {
        const kc::SkinnyPlan p = kc::PlanSkinny(nvfp4, rows, out, in);
        ASSERT_GE(b, static_cast<size_t>(p.planes) * rows * out * sizeof(float)) << out << "x" << in << " rows " << rows;
      }
      prev = b;
    }
  }
}

TEST(SkinnyLinearTest, RejectsBadArguments) {
  ASSERT_TRUE(HasCudaDevice());
  std::mt19937 rng(208);
  TestLinear nv = MakeNvfp4({40}, 128, rng), f8 = MakeFp8(40, 64, rng);
  DeviceBuffer<__half> x = ToDevice(std::vector<__half>(65 * 128 + 8, __float2half(1.f)));
  DeviceBuffer<float> y = Poisoned<float>(65 * 40);
  auto ws = DeviceBuffer<uint8_t>::Allocate(kc::SkinnyLinearWorkspaceBytes(40, 128, 64));
  ASSERT_TRUE(ws.ok());
  constexpr auto kBad = absl::StatusCode::kInvalidArgument;
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_EQ(code(nv.Run(kPath, x.data(), 0, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(f8.Run(kPath, x.data(), 65, y.data(), ws->data())), kBad);  // past kMaxSkinnyRows
  EXPECT_EQ(code(nv.Run(kPath, nullptr, 9, y.data(), ws->data())), kBad);
  EXPECT_EQ(code(nv.Run(kPath, x.data() + 1, 9, y.data(), ws->data())), kBad);  // x not 16-byte aligned
  EXPECT_EQ(code(nv.Run(kPath, x.data(), 9, nullptr, ws->data())), kBad);      // kStore without y
  EXPECT_EQ(code(nv.Run(kPath, x.data(), 9, y.data(), nullptr)), kBad);        // no workspace
  kc::DecodeEpilogue swiglu;
  swiglu.kind = kc::DecodeEpilogue::Kind::kSwiGlu;  // no x_out
  EXPECT_EQ(code(f8.Run(kPath, x.data(), 9, nullptr, ws->data(), swiglu)), kBad);
  kc::DecodeEpilogue norm;
  norm.kind = kc::DecodeEpilogue::Kind::kAddRmsNorm;  // no residual / weights
  EXPECT_EQ(code(f8.Run(kPath, x.data(), 9, nullptr, ws->data(), norm)), kBad);
  kc::Nvfp4LinearDevice bad_in = nv.nv;
  bad_in.in = 64;  // NVFP4 needs in % 128 == 0
  const absl::Status s = kc::Nvfp4SkinnyLinear(bad_in, x.data(), 9, y.data(), ws->data(), nullptr);
  EXPECT_EQ(s.code(), kBad);
  EXPECT_NE(std::string(s.message()).find("128"), std::string::npos) << s.message();
  kc::Nvfp4LinearDevice no_scale = nv.nv;
  no_scale.global_scale = 0.f;
  EXPECT_EQ(code(kc::Nvfp4SkinnyLinear(no_scale, x.data(), 9, y.data(), ws->data(), nullptr)), kBad);
  kc::Fp8LinearDevice no_weight = f8.f8;
  no_weight.weight = nullptr;
  EXPECT_EQ(code(kc::Fp8SkinnyLinear(no_weight, x.data(), 9, y.data(), ws->data(), nullptr)), kBad);
  for (const float v : ToHost(y)) ASSERT_TRUE(std::isnan(v));  // y untouched by the rejected calls
}

}  // namespace
}  // namespace sparkserve::gpu_test
