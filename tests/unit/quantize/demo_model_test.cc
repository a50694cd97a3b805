// demo-model: deterministic bytes per seed (whatever the thread count), a config our parser accepts
// with both layer types and MTP, the exact 4B shapes, and finite varied logits on the CPU model.
#include "head/demo/demo_model.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "gtest/gtest.h"
#include "model/config.h"
#include "head/demo/demo_model_tokenizer.h"
#include "tests/unit/quantize/test_util.h"

namespace sparkserve::head {
namespace {

using model::CheckpointLayout;
using model::LayerType;

using quant::testing::ReadFile;
using quant::testing::TempDir;
namespace fs = std::filesystem;

std::string Write(const TempDir& tmp, const std::string& name, const std::string& recipe, uint64_t seed,
                  int threads) {
  DemoModelOptions o;
  o.recipe = recipe;
  o.seed = seed;
  o.threads = threads;
  o.progress = false;
  auto r = WriteDemoModel(tmp / name, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return tmp / name;
}

TEST(DemoModel, SameSeedSameBytesDifferentSeedDifferentWeights) {
  TempDir tmp;
  for (const char* recipe : {"bf16", "nvfp4-mixed"}) {
    const std::string a = Write(tmp, std::string(recipe) + "a", recipe, 7, 1);
    const std::string b = Write(tmp, std::string(recipe) + "b", recipe, 7, 3);
    const std::string c = Write(tmp, std::string(recipe) + "c", recipe, 8, 2);
    for (const char* f : {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                          "tokenizer_config.json"}) {
      EXPECT_EQ(ReadFile(a + "/" + f), ReadFile(b + "/" + f)) << recipe << " " << f;
    }
    EXPECT_NE(ReadFile(a + "/model.safetensors"), ReadFile(c + "/model.safetensors")) << recipe;
    EXPECT_EQ(ReadFile(a + "/config.json"), ReadFile(c + "/config.json"));
  }
}

TEST(DemoModel, TinyConfigHasBothLayerTypesMtpAndTheTokenizersIds) {
  TempDir tmp;
  const std::string dir = Write(tmp, "m", "bf16", 0, 2);
  auto cfg = model::LoadQwen35Config(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->layout, CheckpointLayout::kCausalLM);
  std::set<LayerType> types(cfg->layer_types.begin(), cfg->layer_types.end());
  EXPECT_EQ(types.size(), 2u);
  EXPECT_EQ(cfg->mtp_num_hidden_layers, 1);
  EXPECT_TRUE(cfg->tie_word_embeddings);
  const DemoTokenizer tok = BuildDemoTokenizer();
  EXPECT_GE(cfg->vocab_size, tok.num_tokens);
  EXPECT_EQ(cfg->vocab_size % 64, 0);
  EXPECT_GT(tok.num_tokens, 256 + 100);  // bytes + learnt merges + added tokens
  EXPECT_EQ(cfg->stop_token_ids(), (std::vector<int32_t>{tok.im_end_id, tok.endoftext_id}));
  EXPECT_TRUE(fs::exists(dir + "/tokenizer.json"));
  EXPECT_NE(ReadFile(dir + "/tokenizer_config.json").find("enable_thinking"), std::string::npos);
}

TEST(DemoModel, FourBShapesAreQwen35_4B) {
  auto s = DemoShapeFor("4b", 0);
  ASSERT_TRUE(s.ok());
  std::map<std::string, core::Shape> shapes;
  int64_t params = 0;
  for (const auto& t : DemoTensors(*s)) {
    shapes[t.name] = t.shape;
    params += core::NumElements(t.shape);
  }
  EXPECT_EQ(shapes["model.embed_tokens.weight"], (core::Shape{248320, 2560}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.q_proj.weight"], (core::Shape{8192, 2560}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.k_proj.weight"], (core::Shape{1024, 2560}));
  EXPECT_EQ(shapes["model.layers.0.linear_attn.in_proj_qkv.weight"], (core::Shape{8192, 2560}));
  EXPECT_EQ(shapes["model.layers.0.linear_attn.conv1d.weight"], (core::Shape{8192, 1, 4}));
  EXPECT_EQ(shapes["model.layers.0.linear_attn.in_proj_a.weight"], (core::Shape{32, 2560}));
  EXPECT_EQ(shapes["model.layers.31.mlp.down_proj.weight"], (core::Shape{2560, 9216}));
  EXPECT_EQ(shapes["mtp.fc.weight"], (core::Shape{2560, 5120}));
  EXPECT_FALSE(shapes.count("lm_head.weight"));  // tied
  EXPECT_FALSE(shapes.count("model.layers.32.mlp.up_proj.weight"));
  // Qwen3.5-4B text + MTP: about 4.2 B parameters.
  EXPECT_GT(params, 4'000'000'000);
  EXPECT_LT(params, 4'500'000'000);
  EXPECT_FALSE(DemoShapeFor("7b", 0).ok());
}

TEST(DemoModel, ValuesAreScaledLikeTheReferenceGenerator) {
  auto stats = [](const quant::SourceTensorInfo& t) {
    const core::Tensor v = DemoTensorValues(t, 0);
    std::vector<float> f(static_cast<size_t>(v.numel()));
    quant::WidenToF32(v, f);
    double sum = 0, sq = 0;
    for (float x : f) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(f.size());
    return std::make_pair(mean, std::sqrt(sq / static_cast<double>(f.size()) - mean * mean));
  };
  using core::DType;
  auto [m1, s1] = stats({"model.layers.0.mlp.up_proj.weight", DType::kBF16, {256, 128}});
  EXPECT_NEAR(m1, 0.0, 0.001);
  EXPECT_NEAR(s1, 0.02, 0.001);
  auto [m2, s2] = stats({"model.layers.0.linear_attn.norm.weight", DType::kBF16, {4096}});
  EXPECT_NEAR(m2, 1.0, 0.01);  // plain-weight gated norm: around 1
  auto [m3, s3] = stats({"model.norm.weight", DType::kBF16, {4096}});
  EXPECT_NEAR(m3, 0.0, 0.01);  // zero-centred norm: around 0
  EXPECT_NEAR(s3, 0.1, 0.01);
  auto [m4, s4] = stats({"model.layers.0.linear_attn.dt_bias", DType::kBF16, {32}});
  EXPECT_EQ(m4, 1.0);
  EXPECT_EQ(s4, 0.0);
  const core::Tensor alog = DemoTensorValues({"model.layers.0.linear_attn.A_log", DType::kBF16, {1000}}, 0);
  std::vector<float> a(1000);
  quant::WidenToF32(alog, a);
  for (float x : a) {
    EXPECT_GE(x, std::log(0.0099f));
    EXPECT_LE(x, std::log(4.01f));
  }
}

TEST(DemoModel, TinyRunsWithFiniteVariedLogits) {
  TempDir tmp;
  const std::string dir = Write(tmp, "m", "bf16", 0, 2);
  auto logits = quant::testing::PrefillLogits(dir, {5, 300, 17, 42, 9});
  ASSERT_TRUE(logits.ok()) << logits.status();
  const size_t V = logits->size() / 5;
  std::set<size_t> argmaxes;
  for (size_t t = 0; t < 5; ++t) {
    size_t best = 0;
    for (size_t v = 0; v < V; ++v) {
      ASSERT_TRUE(std::isfinite((*logits)[t * V + v]));
      if ((*logits)[t * V + v] > (*logits)[t * V + best]) best = v;
    }
    argmaxes.insert(best);
  }
  EXPECT_GT(argmaxes.size(), 1u);
}

TEST(DemoModel, RefusesANonEmptyOutputDirectory) {
  TempDir tmp;
  Write(tmp, "m", "bf16", 0, 1);
  DemoModelOptions o;
  o.progress = false;
  auto again = WriteDemoModel(tmp / "m", o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(std::string(again.status().message()).find("not empty"), std::string::npos);
  o.recipe = "int4";
  EXPECT_FALSE(WriteDemoModel(tmp / "n", o).ok());
  EXPECT_FALSE(fs::exists(tmp / "n"));
}

}  // namespace
}  // namespace sparkserve::head
