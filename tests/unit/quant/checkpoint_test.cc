// Checkpoint on hand-built model directories (written with our safetensors writer): formats decided
// from tensors + config, dequantisation values derived by hand from the bit layouts, and an error
// naming the module for every malformed or unsupported case.
#include "quant/checkpoint.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/safetensors_writer.h"
#include "tests/unit/quant/test_dir.h"

namespace sparkserve::quant {
namespace {

using core::DType;
using core::Tensor;
using ::testing::HasSubstr;

Tensor U8(core::Shape shape, std::vector<uint8_t> v, DType dtype = DType::kU8) {
  Tensor t = Tensor::Empty(std::move(shape), dtype);
  EXPECT_EQ(t.nbytes(), v.size());
  std::memcpy(t.raw_data(), v.data(), std::min(t.nbytes(), v.size()));
  return t;
}
Tensor F32(core::Shape shape, std::vector<float> v) { return Tensor::FromF32(std::move(shape), v); }
Tensor Bf16(core::Shape shape, std::vector<uint16_t> bits) {
  Tensor t = Tensor::Empty(std::move(shape), DType::kBF16);
  std::memcpy(t.raw_data(), bits.data(), t.nbytes());
  return t;
}
Tensor Filled(core::Shape shape, DType dtype, uint8_t byte) {
  Tensor t = Tensor::Empty(std::move(shape), dtype);
  std::memset(t.raw_data(), byte, t.nbytes());
  return t;
}

constexpr char kNvfp4Group[] =
    R"("nv": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}})";

std::string QConfig(const std::string& groups, const std::string& ignore = "[]") {
  return R"({"model_type": "qwen3_5_text", "quantization_config": {"quant_method": "compressed-tensors", )"
         R"("format": "mixed-precision", "config_groups": {)" + groups + R"(}, "ignore": )" + ignore + "}}";
}

// Writes config.json + model.safetensors into a fresh directory.
struct ModelDir {
  TestDir dir;
  ModelDir(const std::string& config, const NamedTensors& tensors) {
    std::ofstream(dir.path("config.json")) << config;
    EXPECT_TRUE(WriteSafetensors(dir.path("model.safetensors"), tensors).ok());
  }
  std::string path() const { return dir.path(""); }
};

// A valid NVFP4 module [out=2, in=16]: row 0 is codes 0..15 in order, row 1 all 0x2 (1.0).
NamedTensors Nvfp4Module(const std::string& p, float global_scale, uint8_t scale_code = 0x38 /* 1.0 */) {
  std::vector<uint8_t> packed;
  for (int j = 0; j < 8; ++j) packed.push_back(static_cast<uint8_t>((2 * j) | ((2 * j + 1) << 4)));
  for (int j = 0; j < 8; ++j) packed.push_back(0x22);
  return {{p + ".weight_packed", U8({2, 8}, packed)},
          {p + ".weight_scale", U8({2, 1}, {scale_code, 0x40 /* 2.0 */}, DType::kF8E4M3)},
          {p + ".weight_global_scale", F32({1}, {global_scale})}};
}

TEST(Checkpoint, Nvfp4DequantisesWithTheGlobalScaleAsADivisor) {
  ModelDir d(QConfig(kNvfp4Group), Nvfp4Module("model.layers.0.mlp.down_proj", 2.0f));
  auto c = Checkpoint::Open(d.path());
  ASSERT_TRUE(c.ok()) << c.status();
  const QuantizedLinear* m = c->FindModule("model.layers.0.mlp.down_proj");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->format, WeightFormat::kNvfp4);
  EXPECT_EQ(m->FormatName(), "nvfp4");
  EXPECT_EQ(m->out, 2);
  EXPECT_EQ(m->in, 16);
  EXPECT_EQ(m->bytes(), 16u + 2u + 4u);
  auto w = m->DequantizeToF32();
  ASSERT_TRUE(w.ok()) << w.status();
  const float codes[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int k = 0; k < 16; ++k) EXPECT_EQ(w->data<float>()[k], codes[k] * 1.0f / 2.0f) << k;   // scale 1, gs 2
  for (int k = 0; k < 16; ++k) EXPECT_EQ(w->data<float>()[16 + k], 1.0f) << k;                // 1.0 * 2 / 2
  EXPECT_TRUE(std::signbit(w->data<float>()[8]));
}

TEST(Checkpoint, Nvfp4RoundsToBf16AsTheLibraryDoes) {
  // scale 1.0 / global 3.0 = 0.3333333 in f32; times 1.0 = 1/3, whose bf16 is 0x3eab = 0.333984375.
  ModelDir d(QConfig(kNvfp4Group), Nvfp4Module("m.proj", 3.0f));
  auto c = Checkpoint::Open(d.path());
  ASSERT_TRUE(c.ok()) << c.status();
  auto w = c->FindModule("m.proj")->DequantizeToF32();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->data<float>()[2], 0.333984375f);  // code 2 = 1.0
}

TEST(Checkpoint, Fp8PerChannelRoundsToTheScaleDtype) {
  // code 0x3f = 1.875; bf16 scale 0x3f81 = 1.0078125; exact product 1.8896484375 rounds to bf16 1.890625.
  const std::string fp8 = R"("f": {"targets": ["re:.*proj"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}})";
  ModelDir d(QConfig(fp8), {{"a.proj.weight", U8({2, 2}, {0x3f, 0x38, 0xb8, 0x01}, DType::kF8E4M3)},
                            {"a.proj.weight_scale", Bf16({2, 1}, {0x3f81, 0x4000 /* 2.0 */})}});
  auto c = Checkpoint::Open(d.path());
  ASSERT_TRUE(c.ok()) << c.status();
  const QuantizedLinear* m = c->FindModule("a.proj");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->FormatName(), "fp8");
  EXPECT_EQ(m->fp8_scale_layout, Fp8ScaleLayout::kPerChannel);
  auto w = m->DequantizeToF32();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->data<float>()[0], 1.890625f);
  EXPECT_EQ(w->data<float>()[1], 1.0078125f);
  EXPECT_EQ(w->data<float>()[2], -2.0f);
  EXPECT_EQ(w->data<float>()[3], 0x1p-8f);  // 2^-9 * 2
}

TEST(Checkpoint, Fp8BlocksCoverPartialEdgeBlocks) {
  // [130, 2] with 128x128 blocks: scale [2, 1]; rows 128 and 129 use the second block's scale.
  std::vector<uint8_t> codes(130 * 2, 0x38);  // 1.0
  const std::string fp8 = R"("f": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}})";
  ModelDir d(QConfig(fp8), {{"b.weight", U8({130, 2}, codes, DType::kF8E4M3)}, {"b.weight_scale", F32({2, 1}, {0.5f, 4.0f})}});
  auto c = Checkpoint::Open(d.path());
  ASSERT_TRUE(c.ok()) << c.status();
  const QuantizedLinear* m = c->FindModule("b");
  EXPECT_EQ(m->fp8_scale_layout, Fp8ScaleLayout::kBlock);
  auto w = m->DequantizeToF32();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->data<float>()[127 * 2 + 1], 0.5f);
  EXPECT_EQ(w->data<float>()[128 * 2], 4.0f);
  EXPECT_EQ(w->data<float>()[129 * 2 + 1], 4.0f);
}

TEST(Checkpoint, UnquantizedModelDecidesFromTensorsAndKeepsOtherTensors) {
  ModelDir d(R"({"model_type": "qwen3_5_text"})",
             {{"model.embed_tokens.weight", Bf16({3, 2}, {0x3f80, 0x4000, 0x4040, 0x4080, 0x40a0, 0x40c0})},
              {"model.norm.weight", F32({2}, {1, 2})},
              {"model.layers.0.linear_attn.conv1d.weight", Filled({4, 1, 4}, DType::kBF16, 0)},
              {"model.layers.0.linear_attn.A_log", F32({2}, {0, 0})},
              {"lm_head.weight", F32({3, 2}, {1, 2, 3, 4, 5, 6})},
              {"x.proj.weight", U8({1, 1}, {0x40}, DType::kF8E4M3)},
              {"x.proj.weight_scale", F32({1}, {0.25f})}});
  auto c = Checkpoint::Open(d.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->quantization_config().has_value());
  EXPECT_EQ(c->modules().size(), 3u);
  EXPECT_EQ(c->FindModule("model.embed_tokens")->FormatName(), "bf16");
  EXPECT_EQ(c->FindModule("lm_head")->FormatName(), "f32");
  EXPECT_EQ(c->FindModule("x.proj")->FormatName(), "fp8");
  EXPECT_EQ(c->FindModule("x.proj")->fp8_scale_layout, Fp8ScaleLayout::kPerTensor);
  EXPECT_EQ((*c->FindModule("x.proj")->DequantizeToF32()).data<float>()[0], 0.5f);
  EXPECT_EQ((*c->FindModule("model.embed_tokens")->DequantizeToF32()).data<float>()[5], 6.0f);
  EXPECT_EQ(c->other_tensors(), (std::vector<std::string>{"model.layers.0.linear_attn.A_log",
                                                          "model.layers.0.linear_attn.conv1d.weight",
                                                          "model.norm.weight"}));
  auto norm = c->DenseF32("model.norm.weight");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->data<float>()[1], 2.0f);
  EXPECT_FALSE(c->DenseF32("nope").ok());
}

std::string OpenError(const std::string& config, const NamedTensors& tensors) {
  ModelDir d(config, tensors);
  auto c = Checkpoint::Open(d.path());
  EXPECT_FALSE(c.ok());
  return std::string(c.status().message());
}

TEST(CheckpointErrors, Nvfp4ShapesAndScales) {
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), {{"m.weight_packed", Filled({2, 4}, DType::kU8, 0)},
                                               {"m.weight_scale", Filled({2, 1}, DType::kF8E4M3, 0x38)},
                                               {"m.weight_global_scale", F32({1}, {1})}}),
              AllOf(HasSubstr("module 'm'"), HasSubstr("input size 8 is not a multiple of the NVFP4 group size 16")));
  NamedTensors bad_scale = Nvfp4Module("m", 1.0f);
  bad_scale[1].second = Filled({2, 2}, DType::kF8E4M3, 0x38);
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), bad_scale),
              AllOf(HasSubstr("module 'm'"), HasSubstr("weight_scale is fp8_e4m3[2, 2] cpu, expected fp8_e4m3[2, 1]")));
  NamedTensors f32_scale = Nvfp4Module("m", 1.0f);
  f32_scale[1].second = F32({2, 1}, {1, 1});
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), f32_scale), HasSubstr("weight_scale is f32[2, 1]"));
  NamedTensors no_global = Nvfp4Module("m", 1.0f);
  no_global.pop_back();
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), no_global), AllOf(HasSubstr("module 'm'"), HasSubstr("missing weight_global_scale")));
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), Nvfp4Module("m", 0.0f)), HasSubstr("weight_global_scale is 0"));
  NamedTensors int_packed = {{"m.weight_packed", Filled({2, 2}, DType::kI32, 0)}, {"m.weight_scale", F32({2, 1}, {1, 1})}};
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), int_packed), AllOf(HasSubstr("module 'm'"), HasSubstr("not supported")));
}

TEST(CheckpointErrors, Fp8ScaleShapes) {
  const std::string fp8 = R"("f": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}})";
  EXPECT_THAT(OpenError(QConfig(fp8), {{"m.weight", Filled({4, 8}, DType::kF8E4M3, 0x38)}, {"m.weight_scale", F32({3, 2}, {1, 1, 1, 1, 1, 1})}}),
              AllOf(HasSubstr("module 'm' (fp8)"), HasSubstr("weight_scale is f32[3, 2]"), HasSubstr("[4, 1] (per channel)")));
  EXPECT_THAT(OpenError(QConfig(fp8), {{"m.weight", Filled({4, 8}, DType::kF8E4M3, 0x38)}}), HasSubstr("missing weight_scale"));
  const std::string per_tensor = R"("f": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}})";
  EXPECT_THAT(OpenError(QConfig(per_tensor), {{"m.weight", Filled({4, 8}, DType::kF8E4M3, 0x38)}, {"m.weight_scale", F32({4, 1}, {1, 1, 1, 1})}}),
              AllOf(HasSubstr("module 'm'"), HasSubstr("does not fit the 'tensor' strategy")))
      << "a per-channel scale where the config says per tensor";
}

TEST(CheckpointErrors, FormatContradictsConfig) {
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), {{"m.weight", Filled({2, 16}, DType::kBF16, 0)}}),
              AllOf(HasSubstr("module 'm'"), HasSubstr("stores a dense bf16 weight but config group 'nv'"),
                    HasSubstr("nvfp4-pack-quantized")));
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group, R"(["m"])"), Nvfp4Module("m", 1.0f)),
              AllOf(HasSubstr("module 'm'"), HasSubstr("stores NVFP4 tensors"), HasSubstr("unquantized")));
}

TEST(CheckpointErrors, UnsupportedFormatsAndParameters) {
  const std::string int4 = R"("g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 128}})";
  EXPECT_THAT(OpenError(QConfig(int4), {{"m.weight", Filled({2, 2}, DType::kBF16, 0)}}),
              AllOf(HasSubstr("config.json"), HasSubstr("config_groups.g"), HasSubstr("'pack-quantized'"),
                    HasSubstr("not supported")));
  const std::string marlin = R"("g": {"targets": ["Linear"], "format": "marlin-24", "weights": {"num_bits": 4, "type": "int", "group_size": 128}})";
  EXPECT_THAT(OpenError(QConfig(marlin), {}), HasSubstr("'marlin-24'"));
  const std::string w8a8int = R"("g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}, "input_activations": {"num_bits": 8, "type": "int", "dynamic": true, "strategy": "token"}})";
  EXPECT_THAT(OpenError(QConfig(w8a8int), {}), HasSubstr("'int-quantized'"));
  NamedTensors zp = Nvfp4Module("m", 1.0f);
  zp.push_back({"m.weight_zero_point", Filled({2, 1}, DType::kU8, 0)});
  EXPECT_THAT(OpenError(QConfig(kNvfp4Group), zp), AllOf(HasSubstr("module 'm'"), HasSubstr("weight_zero_point")));
  EXPECT_THAT(OpenError(R"({"quantization_config": {"quant_method": "gptq"}})", {}), HasSubstr("unsupported quantization method 'gptq'"));
}

TEST(CheckpointErrors, OrphansAndMissingFiles) {
  EXPECT_THAT(OpenError(R"({})", {{"model.norm.weight", F32({2}, {1, 1})}, {"model.norm.weight_scale", F32({1}, {1})}}),
              AllOf(HasSubstr("model.norm.weight_scale"), HasSubstr("no 2-D weight")));
  TestDir empty;
  EXPECT_THAT(std::string(Checkpoint::Open(empty.path("")).status().message()), HasSubstr("no config.json"));
  EXPECT_THAT(std::string(Checkpoint::Open(empty.path("missing")).status().message()), HasSubstr("not a directory"));
  std::ofstream(empty.path("config.json")) << "{}";
  EXPECT_THAT(std::string(Checkpoint::Open(empty.path("")).status().message()), HasSubstr("no model.safetensors"));
  std::ofstream(empty.path("config.json")) << "{broken";
  EXPECT_THAT(std::string(Checkpoint::Open(empty.path("")).status().message()),
              AllOf(HasSubstr("config.json"), HasSubstr("not valid JSON")));
}

}  // namespace
}  // namespace sparkserve::quant
