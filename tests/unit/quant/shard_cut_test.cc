// CutCheckpoint on every stored layout: a cut module dequantises to exactly the same rows / columns
// of the whole module's dequantisation (NVFP4 codes + group scales, FP8 with tensor / channel /
// block scales, dense bf16), whole entries and one row range are zero-copy views, several ranges
// concatenate in order, and cuts a layout cannot make are refused with the module named.
#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "quant/compressed_tensors.h"
#include "quant/shard_cut.h"

namespace sparkserve::quant {
namespace {

using Tensors = std::map<std::string, core::Tensor, std::less<>>;

// Random bytes, avoiding the FP8 NaN codes (0x7f / 0xff) so every dequantised value is finite.
core::Tensor RandomBytes(core::Shape shape, core::DType dtype, std::mt19937& rng) {
  core::Tensor t = core::Tensor::Empty(std::move(shape), dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    uint8_t b = static_cast<uint8_t>(rng());
    if ((b & 0x7f) == 0x7f) b &= 0xfe;
    p[i] = b;
  }
  return t;
}

core::Tensor RandomF32(core::Shape shape, std::mt19937& rng, float lo, float hi) {
  core::Tensor t = core::Tensor::Empty(std::move(shape), core::DType::kF32);
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& v : t.span<float>()) v = u(rng);
  return t;
}

// Modules: "nv" NVFP4 [64, 96], "ch" FP8 per channel [48, 64], "blk" FP8 128x128 blocks [256, 384],
// "pt" FP8 per tensor [32, 32], "dense" bf16 [40, 24] with a bias, and a 3-d "conv.weight" [12, 1, 4].
Checkpoint MakeCheckpoint() {
  std::mt19937 rng(11);
  Tensors t;
  t["nv.weight_packed"] = RandomBytes({64, 48}, core::DType::kU8, rng);
  t["nv.weight_scale"] = RandomBytes({64, 6}, core::DType::kF8E4M3, rng);
  t["nv.weight_global_scale"] = core::Tensor::FromF32({1}, std::vector<float>{448.0f * 6 / 2.5f});
  t["ch.weight"] = RandomBytes({48, 64}, core::DType::kF8E4M3, rng);
  t["ch.weight_scale"] = RandomF32({48, 1}, rng, 0.01f, 0.1f);
  t["blk.weight"] = RandomBytes({256, 384}, core::DType::kF8E4M3, rng);
  t["blk.weight_scale"] = RandomF32({2, 3}, rng, 0.01f, 0.1f);
  t["pt.weight"] = RandomBytes({32, 32}, core::DType::kF8E4M3, rng);
  t["pt.weight_scale"] = RandomF32({1}, rng, 0.01f, 0.1f);
  t["dense.weight"] = RandomBytes({40, 24}, core::DType::kBF16, rng);
  t["dense.bias"] = RandomF32({40}, rng, -1, 1);
  t["conv.weight"] = RandomF32({12, 1, 4}, rng, -1, 1);
  auto q = ParseQuantizationConfig(R"({
    "quant_method": "compressed-tensors", "format": "mixed-precision",
    "config_groups": {
      "g_nv": {"targets": ["re:^nv$"], "format": "nvfp4-pack-quantized",
               "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}},
      "g_ch": {"targets": ["re:^ch$"], "format": "float-quantized",
               "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}},
      "g_blk": {"targets": ["re:^blk$"], "format": "float-quantized",
                "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}},
      "g_pt": {"targets": ["re:^pt$"], "format": "float-quantized",
               "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}},
    "ignore": ["dense"]})",
                                   "test");
  EXPECT_TRUE(q.ok()) << q.status();
  auto c = Checkpoint::FromTensors(std::move(t), *q, "test checkpoint");
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

std::vector<float> Dequantized(const Checkpoint& c, const std::string& module) {
  const QuantizedLinear* m = c.FindModule(module);
  EXPECT_NE(m, nullptr) << module;
  if (m == nullptr) return {};
  auto f = m->DequantizeToF32();
  EXPECT_TRUE(f.ok()) << f.status();
  return std::vector<float>(f->data<float>(), f->data<float>() + f->numel());
}

// Rows `ranges` then columns `cols` of a row-major [rows, in] matrix.
std::vector<float> Select(const std::vector<float>& m, int64_t in, const std::vector<IndexRange>& rows,
                          const std::vector<IndexRange>& cols) {
  std::vector<float> out;
  for (const auto& [rb, re] : rows) {
    for (int64_t r = rb; r < re; ++r) {
      for (const auto& [cb, ce] : cols) {
        for (int64_t c = cb; c < ce; ++c) out.push_back(m[static_cast<size_t>(r * in + c)]);
      }
    }
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  std::string module;
  int64_t out, in;
  TensorCut cut;
};

TEST(ShardCut, CutModulesDequantiseToTheSameRowsAndColumns) {
  const Checkpoint full = MakeCheckpoint();
  const std::vector<Case> cases = {
      {"nv", 64, 96, TensorCut::Rows({{16, 40}})},
      {"nv", 64, 96, TensorCut::Rows({{0, 8}, {32, 40}, {60, 64}})},
      {"nv", 64, 96, TensorCut::Cols({{32, 64}})},
      {"nv", 64, 96, TensorCut::Cols({{0, 16}, {80, 96}})},
      {"ch", 48, 64, TensorCut::Rows({{24, 48}})},
      {"ch", 48, 64, TensorCut::Cols({{10, 30}})},
      {"blk", 256, 384, TensorCut::Rows({{128, 256}})},
      {"blk", 256, 384, TensorCut::Cols({{128, 384}})},
      {"pt", 32, 32, TensorCut::Rows({{0, 16}})},
      {"pt", 32, 32, TensorCut::Cols({{8, 24}})},
      {"dense", 40, 24, TensorCut::Rows({{10, 20}, {30, 40}})},
      {"dense", 40, 24, TensorCut::Cols({{4, 12}})},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.module);
    auto shard = CutCheckpoint(full, {{k.module, k.cut}}, "shard");
    ASSERT_TRUE(shard.ok()) << shard.status();
    const std::vector<IndexRange> all_rows = {{0, k.out}}, all_cols = {{0, k.in}};
    const auto& rows = k.cut.axis == TensorCut::Axis::kRows ? k.cut.ranges : all_rows;
    const auto& cols = k.cut.axis == TensorCut::Axis::kCols ? k.cut.ranges : all_cols;
    EXPECT_TRUE(SameBits(Dequantized(*shard, k.module), Select(Dequantized(full, k.module), k.in, rows, cols)));
    EXPECT_EQ(shard->modules().size(), 1u);  // only what the cuts name
  }
  // The dense module's bias follows its output rows, and stays whole under a column cut.
  auto rows = CutCheckpoint(full, {{"dense", TensorCut::Rows({{10, 20}, {30, 40}})}}, "shard");
  ASSERT_TRUE(rows.ok());
  const core::Tensor& bias = rows->FindModule("dense")->bias;
  ASSERT_EQ(bias.numel(), 20);
  EXPECT_EQ(bias.data<float>()[0], full.FindModule("dense")->bias.data<float>()[10]);
  EXPECT_EQ(bias.data<float>()[10], full.FindModule("dense")->bias.data<float>()[30]);
}

TEST(ShardCut, WholeEntriesAndOneRowRangeShareTheCheckpointsMemory) {
  const Checkpoint full = MakeCheckpoint();
  auto shard = CutCheckpoint(full, {{"nv", TensorCut::Rows({{16, 32}})}, {"pt", TensorCut::Whole()},
                                    {"conv.weight", TensorCut::Rows({{4, 8}})}},
                             "shard");
  ASSERT_TRUE(shard.ok()) << shard.status();
  const auto* nv = static_cast<const uint8_t*>(full.FindModule("nv")->weight.raw_data());
  EXPECT_EQ(shard->FindModule("nv")->weight.raw_data(), nv + 16 * 48);
  EXPECT_EQ(shard->FindModule("pt")->weight.raw_data(), full.FindModule("pt")->weight.raw_data());
  auto conv = shard->Tensor("conv.weight");
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->shape(), (core::Shape{4, 1, 4}));
  EXPECT_EQ(conv->data<float>()[0], full.Tensor("conv.weight")->data<float>()[16]);
}

TEST(ShardCut, CutsTheLayoutCannotMakeAreRefusedNamingTheModule) {
  const Checkpoint full = MakeCheckpoint();
  const std::vector<std::pair<std::string, TensorCut>> bad = {
      {"nv", TensorCut::Cols({{8, 40}})},       // not on 16-element groups
      {"blk", TensorCut::Rows({{64, 192}})},    // not on 128-row blocks
      {"blk", TensorCut::Cols({{0, 200}})},     // not on 128-column blocks (and not the end)
      {"ch", TensorCut::Rows({{40, 60}})},      // past the rows
      {"ch", TensorCut::Rows({})},              // no ranges
      {"conv.weight", TensorCut::Cols({{0, 2}})},  // not a module: rows only
      {"missing", TensorCut::Whole()},
  };
  for (const auto& [name, cut] : bad) {
    SCOPED_TRACE(name);
    auto shard = CutCheckpoint(full, {{name, cut}}, "shard");
    ASSERT_FALSE(shard.ok());
    EXPECT_NE(std::string(shard.status().message()).find(name), std::string::npos) << shard.status();
  }
}

}  // namespace
}  // namespace sparkserve::quant
