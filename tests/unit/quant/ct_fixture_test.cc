// The compressed-tensors fixture (tests/golden/ct_fixture, written by the library itself through
// tests/golden/make_ct_fixture.py) loads through Checkpoint with the formats and groups the library
// chose, and every dequantised weight equals the library's own decompression bit for bit.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/checkpoint.h"

namespace sparkserve::quant {
namespace {

const std::string kDir = std::string(SPARKSERVE_SOURCE_DIR) + "/tests/golden/ct_fixture";

nlohmann::json Expected() {
  std::ifstream in(kDir + "/expected.json");
  return nlohmann::json::parse(in);
}

TEST(CtFixture, FormatsShapesAndGroupsAreTheLibrarys) {
  auto ckpt = Checkpoint::Open(kDir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const nlohmann::json expected = Expected()["modules"];
  std::set<std::string> names;
  for (const auto& [name, m] : ckpt->modules()) names.insert(name);
  std::set<std::string> want;
  for (const auto& [name, e] : expected.items()) want.insert(name);
  EXPECT_EQ(names, want);
  ASSERT_TRUE(ckpt->quantization_config().has_value());
  const QuantizationConfig& qc = *ckpt->quantization_config();
  for (const auto& [name, e] : expected.items()) {
    const QuantizedLinear* m = ckpt->FindModule(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_EQ(m->FormatName(), e["format"].get<std::string>()) << name;
    EXPECT_EQ(m->out, e["shape"][0].get<int64_t>()) << name;
    EXPECT_EQ(m->in, e["shape"][1].get<int64_t>()) << name;
    const QuantScheme* s = qc.SchemeFor(name, name.find("embed") != std::string::npos ? "Embedding" : "Linear");
    if (e["group"].is_null()) {
      EXPECT_EQ(s, nullptr) << name;
    } else {
      ASSERT_NE(s, nullptr) << name;
      EXPECT_EQ(s->name, e["group"].get<std::string>()) << name;
      EXPECT_EQ(qc.FormatFor(*s), e["library_format"].get<std::string>()) << name;
    }
    if (e.contains("fp8_scale")) {
      const std::string layout = e["fp8_scale"];
      const Fp8ScaleLayout want_layout = layout == "channel" ? Fp8ScaleLayout::kPerChannel
                                         : layout == "block" ? Fp8ScaleLayout::kBlock
                                                             : Fp8ScaleLayout::kPerTensor;
      EXPECT_EQ(m->fp8_scale_layout, want_layout) << name;
    }
  }
  // W4A4 keeps its input global scale; FP8 W8A8 static keeps its input scale.
  EXPECT_TRUE(ckpt->FindModule("model.layers.0.self_attn.k_proj")->input_global_scale.defined());
  EXPECT_FALSE(ckpt->FindModule("model.layers.0.self_attn.q_proj")->input_global_scale.defined());
  EXPECT_TRUE(ckpt->FindModule("model.layers.0.mlp.up_proj")->input_scale.defined());
  EXPECT_THAT(ckpt->other_tensors(),
              ::testing::IsSupersetOf({"model.norm.weight", "model.layers.0.input_layernorm.weight",
                                       "model.layers.0.linear_attn.conv1d.weight", "model.layers.0.linear_attn.A_log"}));
  auto norm = ckpt->DenseF32("model.norm.weight");
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_EQ(norm->shape(), core::Shape{48});
}

TEST(CtFixture, DequantisedWeightsEqualTheLibrarysDecompressionBitForBit) {
  auto ckpt = Checkpoint::Open(kDir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto golden = SafetensorsFile::Open(kDir + "/decompressed.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  int checked = 0;
  for (const auto& [name, m] : ckpt->modules()) {
    auto ours = m.DequantizeToF32();
    ASSERT_TRUE(ours.ok()) << ours.status();
    auto want = golden->Get(name + ".weight");
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(want->dtype(), core::DType::kF32);
    ASSERT_EQ(ours->shape(), want->shape()) << name;
    const core::Tensor w = want->Clone();  // aligned copy
    const float* a = ours->data<float>();
    const float* b = w.data<float>();
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (std::memcmp(&a[i], &b[i], 4) != 0) {
        if (first < 0) first = i;
        ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0) << name << ": " << mismatches << " of " << w.numel() << " differ; first at " << first
                             << ": ours " << (first >= 0 ? a[first] : 0) << " library " << (first >= 0 ? b[first] : 0);
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

}  // namespace
}  // namespace sparkserve::quant
