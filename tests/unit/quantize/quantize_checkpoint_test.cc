// End to end: the tiny demo checkpoint quantised with every built-in recipe is read back by our
// Checkpoint with the intended formats, dequantises within the formats' error of the source, runs
// on the CPU model; bad input and failures give clear errors and leave no complete-looking output.
#include "quant/quantizer/quantize_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "gtest/gtest.h"
#include "model/config.h"
#include "head/demo/demo_model.h"
#include "nlohmann/json.hpp"
#include "quant/checkpoint.h"
#include "tests/unit/quantize/test_util.h"

namespace sparkserve::quant {
namespace {

using testing::DequantSource;
using testing::ReadFile;
using testing::TempDir;
namespace fs = std::filesystem;

const std::string& TinyBf16() {
  static TempDir* dir = new TempDir();  // lives for the test binary
  static const std::string path = [] {
    head::DemoModelOptions o;
    o.progress = false;
    auto r = head::WriteDemoModel(*dir / "tiny", o);
    EXPECT_TRUE(r.ok()) << r.status();
    return *dir / "tiny";
  }();
  return path;
}

QuantizeOptions TinyOptions() {
  QuantizeOptions o;
  o.tie_word_embeddings = true;
  o.text_prefix = "model.";
  o.progress = false;
  o.threads = 2;
  return o;
}

double RelErr(const core::Tensor& ref, const core::Tensor& got) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = ref.data<float>()[i], b = got.data<float>()[i];
    num += (a - b) * (a - b);
    den += a * a;
  }
  return std::sqrt(num / den);
}

struct RecipeCase {
  const char* recipe;
  std::map<std::string, std::string> expect;  // module -> FormatName() for a sample of modules
};

class QuantizeRecipe : public ::testing::TestWithParam<RecipeCase> {};

TEST_P(QuantizeRecipe, OutputReadsBackWithIntendedFormatsAndRuns) {
  const RecipeCase& c = GetParam();
  TempDir tmp;
  auto recipe = Recipe::BuiltIn(c.recipe);
  ASSERT_TRUE(recipe.ok());
  QuantizeOptions opts = TinyOptions();
  opts.max_shard_bytes = 300 << 10;  // several shards + index
  auto report = QuantizeCheckpoint(TinyBf16(), tmp / "out", *recipe, opts);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->shards, 1u);
  EXPECT_TRUE(fs::exists(tmp / "out/model.safetensors.index.json"));
  EXPECT_EQ(ReadFile(tmp / "out/tokenizer.json"), ReadFile(TinyBf16() + "/tokenizer.json"));
  EXPECT_EQ(ReadFile(tmp / "out/generation_config.json"), ReadFile(TinyBf16() + "/generation_config.json"));
  EXPECT_FALSE(fs::exists(tmp / "out/model.safetensors"));

  auto src = Checkpoint::Open(TinyBf16());
  auto out = Checkpoint::Open(tmp / "out");
  ASSERT_TRUE(src.ok() && out.ok()) << out.status();
  ASSERT_TRUE(out->quantization_config().has_value());
  for (const auto& [module, format] : c.expect) {
    const QuantizedLinear* m = out->FindModule(module);
    ASSERT_NE(m, nullptr) << module;
    EXPECT_EQ(m->FormatName(), format) << module;
  }
  // Every source module is present, dequantises within its format's error, and other tensors are equal.
  for (const auto& [name, sm] : src->modules()) {
    const QuantizedLinear* m = out->FindModule(name);
    ASSERT_NE(m, nullptr) << name;
    auto ref = sm.DequantizeToF32();
    auto got = m->DequantizeToF32();
    ASSERT_TRUE(ref.ok() && got.ok()) << name;
    const double err = RelErr(*ref, *got);
    const double bound = m->format == WeightFormat::kNvfp4 ? 0.11 : m->format == WeightFormat::kFp8 ? 0.03 : 0.0;
    EXPECT_LE(err, bound) << name << " " << m->FormatName();
  }
  EXPECT_EQ(src->other_tensors(), out->other_tensors());
  const bool untied = std::string(c.recipe) == "nvfp4-mixed";
  EXPECT_EQ(out->FindModule("lm_head") != nullptr, untied);
  auto cfg = model::LoadQwen35Config(tmp / "out");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tie_word_embeddings, !untied);
  EXPECT_EQ(report->untied_lm_head, untied);
  if (report->nvfp4.signal > 0) {
    EXPECT_LT(report->nvfp4.error, report->nvfp4.rtn_error);
  }

  // The quantised model runs and stays close to the source on a prompt.
  const std::vector<int32_t> ids = {1, 50, 99, 7, 300, 12, 41, 8};
  auto ref_logits = testing::PrefillLogits(TinyBf16(), ids);
  auto q_logits = testing::PrefillLogits(tmp / "out", ids);
  ASSERT_TRUE(ref_logits.ok()) << ref_logits.status();
  ASSERT_TRUE(q_logits.ok()) << q_logits.status();
  ASSERT_EQ(ref_logits->size(), q_logits->size());
  double num = 0, den = 0;
  for (size_t i = 0; i < q_logits->size(); ++i) {
    ASSERT_TRUE(std::isfinite((*q_logits)[i]));
    num += ((*q_logits)[i] - (*ref_logits)[i]) * ((*q_logits)[i] - (*ref_logits)[i]);
    den += (*ref_logits)[i] * (*ref_logits)[i];
  }
  const double logit_err = std::sqrt(num / den);
  // Random weights amplify weight noise; a wrong scale or layout gives errors of 1 or more.
  EXPECT_LT(logit_err, 0.5) << c.recipe;
  RecordProperty("logit_rel_err", std::to_string(logit_err));
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, QuantizeRecipe,
    ::testing::Values(
        RecipeCase{"nvfp4-mixed",
                   {{"model.layers.0.mlp.up_proj", "nvfp4"},
                    {"model.layers.3.self_attn.q_proj", "nvfp4"},
                    {"model.layers.0.linear_attn.in_proj_qkv", "fp8"},
                    {"model.layers.1.linear_attn.out_proj", "fp8"},
                    {"model.layers.2.linear_attn.in_proj_a", "bf16"},
                    {"mtp.layers.0.mlp.up_proj", "bf16"},
                    {"mtp.fc", "bf16"},
                    {"model.embed_tokens", "bf16"},
                    {"lm_head", "fp8"}}},
        RecipeCase{"nvfp4",
                   {{"model.layers.0.linear_attn.in_proj_b", "nvfp4"},
                    {"model.layers.3.self_attn.o_proj", "nvfp4"},
                    {"mtp.layers.0.self_attn.q_proj", "bf16"}}},
        RecipeCase{"fp8",
                   {{"model.layers.0.mlp.down_proj", "fp8"},
                    {"model.layers.0.linear_attn.in_proj_a", "fp8"},
                    {"mtp.fc", "bf16"}}}),
    [](const auto& info) {
      std::string n = info.param.recipe;
      for (char& ch : n) ch = ch == '-' ? '_' : ch;
      return n;
    });

TEST(QuantizeCheckpoint, RefusesQuantisedInputAndUnusableOutput) {
  TempDir tmp;
  auto recipe = Recipe::BuiltIn("nvfp4-mixed");
  ASSERT_TRUE(QuantizeCheckpoint(TinyBf16(), tmp / "q", *recipe, TinyOptions()).ok());
  auto again = QuantizeCheckpoint(tmp / "q", tmp / "qq", *recipe, TinyOptions());
  ASSERT_FALSE(again.ok());
  EXPECT_NE(std::string(again.status().message()).find("already quantised"), std::string::npos) << again.status();
  EXPECT_FALSE(fs::exists(tmp / "qq"));
  // Quantised tensors without a quantization_config are refused too.
  fs::create_directories(tmp / "raw");
  fs::copy_file(tmp / "q/model.safetensors", tmp / "raw/model.safetensors");
  fs::copy_file(TinyBf16() + "/config.json", tmp / "raw/config.json");
  auto raw = QuantizeCheckpoint(tmp / "raw", tmp / "rr", *recipe, TinyOptions());
  ASSERT_FALSE(raw.ok());
  EXPECT_NE(std::string(raw.status().message()).find("already quantised"), std::string::npos) << raw.status();
  // Output exists and is not empty.
  auto busy = QuantizeCheckpoint(TinyBf16(), tmp / "q", *recipe, TinyOptions());
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(std::string(busy.status().message()).find("not empty"), std::string::npos) << busy.status();
  // Output under a regular file: cannot be created.
  auto unwritable = QuantizeCheckpoint(TinyBf16(), tmp / "q/config.json/out", *recipe, TinyOptions());
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(std::string(unwritable.status().message()).find("cannot create"), std::string::npos)
      << unwritable.status();
  // No input.
  auto missing = QuantizeCheckpoint(tmp / "nothing", tmp / "n", *recipe, TinyOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("no config.json"), std::string::npos);
  // An empty output directory is fine.
  fs::create_directories(tmp / "empty");
  EXPECT_TRUE(QuantizeCheckpoint(TinyBf16(), tmp / "empty", *recipe, TinyOptions()).ok());
}

// In-memory source for shapes the demo model does not have.
class MapSource : public TensorSource {
 public:
  std::vector<SourceTensorInfo> List() const override {
    std::vector<SourceTensorInfo> r;
    for (const auto& [n, t] : tensors) r.push_back({n, t.dtype(), t.shape()});
    return r;
  }
  absl::StatusOr<core::Tensor> Load(const std::string& name) const override {
    if (fail_on == name) return absl::DataLossError("simulated read error");
    return tensors.at(name);
  }
  std::map<std::string, core::Tensor> tensors;
  std::string fail_on;
};

core::Tensor Ramp(core::Shape shape) {
  core::Tensor t = core::Tensor::Empty(shape, core::DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.01f * static_cast<float>((i * 37) % 101 - 50);
  return t;
}

TEST(QuantizeTensors, Nvfp4FallsBackToFp8WhenTheInputDimIsNotAMultipleOf16) {
  TempDir tmp;
  MapSource src;
  src.tensors["model.layers.0.mlp.up_proj.weight"] = Ramp({32, 24});
  src.tensors["model.layers.0.mlp.down_proj.weight"] = Ramp({24, 32});
  src.tensors["model.norm.weight"] = Ramp({24});
  auto recipe = Recipe::BuiltIn("nvfp4");
  auto report = QuantizeTensors(src, *recipe, TinyOptions(), tmp.path().string());
  ASSERT_TRUE(report.ok()) << report.status();
  std::map<std::string, ModuleReport> by;
  for (const auto& m : report->modules) by[m.name] = m;
  EXPECT_EQ(by["model.layers.0.mlp.up_proj"].scheme, WeightScheme::kFp8);
  EXPECT_NE(by["model.layers.0.mlp.up_proj"].fallback.find("not a multiple of 16"), std::string::npos);
  EXPECT_EQ(by["model.layers.0.mlp.down_proj"].scheme, WeightScheme::kNvfp4);
  EXPECT_TRUE(by["model.layers.0.mlp.down_proj"].fallback.empty());
  EXPECT_NE(FormatReportTable(*report).find("fallback: model.layers.0.mlp.up_proj"), std::string::npos);
  // The config written from this report makes our reader see exactly those formats.
  auto cfg = QuantizedConfigJson(R"({"model_type": "qwen3_5_text"})", *report);
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(WriteTextFile(tmp / "config.json", *cfg).ok());
  auto ck = Checkpoint::Open(tmp.path().string());
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ(ck->FindModule("model.layers.0.mlp.up_proj")->FormatName(), "fp8");
  EXPECT_EQ(ck->FindModule("model.layers.0.mlp.down_proj")->FormatName(), "nvfp4");
}

TEST(QuantizeTensors, CalibrationScalesBecomeW4A4AndKvCacheScheme) {
  TempDir tmp;
  MapSource src;
  src.tensors["model.layers.0.self_attn.q_proj.weight"] = Ramp({64, 32});
  src.tensors["model.layers.0.self_attn.k_proj.weight"] = Ramp({16, 32});
  QuantizeOptions o = TinyOptions();
  o.calibration.input_amax = {{"model.layers.0.self_attn.q_proj", 12.0f}, {"model.layers.0.self_attn.k_proj", 3.0f}};
  o.calibration.kv_amax = {{"model.layers.0.self_attn", {8.96f, 4.48f}}};
  auto report = QuantizeTensors(src, *Recipe::BuiltIn("nvfp4"), o, tmp.path().string());
  ASSERT_TRUE(report.ok()) << report.status();
  auto cfg = QuantizedConfigJson(R"({})", *report);
  ASSERT_TRUE(cfg.ok());
  const auto j = nlohmann::json::parse(*cfg);
  EXPECT_EQ(j["quantization_config"]["config_groups"]["group_0"]["input_activations"]["dynamic"], "local");
  EXPECT_EQ(j["quantization_config"]["kv_cache_scheme"]["num_bits"], 8);
  ASSERT_TRUE(WriteTextFile(tmp / "config.json", *cfg).ok());
  auto ck = Checkpoint::Open(tmp.path().string());
  ASSERT_TRUE(ck.ok()) << ck.status();
  const QuantizedLinear* k = ck->FindModule("model.layers.0.self_attn.k_proj");
  ASSERT_NE(k, nullptr);
  ASSERT_TRUE(k->input_global_scale.defined());
  EXPECT_FLOAT_EQ(k->input_global_scale.data<float>()[0], 448.0f * 6.0f / 3.0f);
  auto ks = ck->DenseF32("model.layers.0.self_attn.k_scale");
  ASSERT_TRUE(ks.ok()) << ks.status();
  EXPECT_FLOAT_EQ(ks->data<float>()[0], 0.02f);
}

TEST(QuantizeTensors, AFailureLeavesNoCompleteLookingOutput) {
  TempDir tmp;
  MapSource src;
  for (int i = 0; i < 8; ++i) src.tensors[fmt::format("model.layers.{}.mlp.up_proj.weight", i)] = Ramp({32, 32});
  src.fail_on = "model.layers.5.mlp.up_proj.weight";
  {
    auto out = OutputDirectory::Begin(tmp / "out");
    ASSERT_TRUE(out.ok());
    auto report = QuantizeTensors(src, *Recipe::BuiltIn("nvfp4"), TinyOptions(), out->path());
    ASSERT_FALSE(report.ok());
    EXPECT_NE(std::string(report.status().message()).find("simulated read error"), std::string::npos);
    EXPECT_NE(std::string(report.status().message()).find("model.layers.5.mlp.up_proj.weight"), std::string::npos);
    EXPECT_FALSE(fs::exists(tmp / "out"));  // only the .partial directory exists until Commit
  }
  EXPECT_TRUE(fs::is_empty(tmp.path()));  // and it is removed when abandoned
  // Tensors that are not floating point are refused before anything is written.
  MapSource ints;
  ints.tensors["model.layers.0.mlp.up_proj.weight"] = core::Tensor::Zeros({16, 16}, core::DType::kI32);
  auto bad = QuantizeTensors(ints, *Recipe::BuiltIn("nvfp4"), TinyOptions(), tmp.path().string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("already quantised"), std::string::npos);
}

}  // namespace
}  // namespace sparkserve::quant
