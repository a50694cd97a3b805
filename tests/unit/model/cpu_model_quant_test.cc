// A compressed-tensors checkpoint (NVFP4 attention + MLP, FP8 per-channel GDN projections, the
// rest dense) runs on the CPU model and gives exactly the logits of a dense f32 checkpoint holding
// the same dequantised weights. Both checkpoints are written here with the quant layer's writer.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include <unistd.h>
#include <vector>

#include "fmt/format.h"
#include "core/half.h"
#include "gtest/gtest.h"
#include "model/checkpoint_weight_source.h"
#include "nlohmann/json.hpp"
#include "quant/checkpoint.h"
#include "quant/e2m1.h"
#include "quant/e4m3.h"
#include "quant/safetensors_writer.h"
#include "tests/unit/model/golden_fixture.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::model {
namespace {

using namespace testing;  // NOLINT
namespace fs = std::filesystem;

core::Tensor Bytes(core::Shape shape, core::DType dtype, const std::vector<uint8_t>& v) {
  core::Tensor t = core::Tensor::Empty(std::move(shape), dtype);
  std::memcpy(t.raw_data(), v.data(), v.size());
  return t;
}

// NVFP4 as producers write it: global scale = 448 * 6 / amax (a divisor), per-16 fp8 scales.
void AddNvfp4(const std::string& p, const core::Tensor& w, quant::NamedTensors* out) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const float* W = w.data<float>();
  float amax = 0;
  for (int64_t i = 0; i < w.numel(); ++i) amax = std::max(amax, std::abs(W[i]));
  const float gs = 448.0f * 6.0f / amax;
  std::vector<float> scale_f(rows * cols / 16), scaled(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 16; ++g) {
      float m = 0;
      for (int i = 0; i < 16; ++i) m = std::max(m, std::abs(W[r * cols + g * 16 + i]));
      scale_f[r * cols / 16 + g] = m / 6.0f * gs;
    }
  std::vector<uint8_t> scale_codes(scale_f.size()), packed(rows * cols / 2);
  quant::EncodeE4M3(scale_f, scale_codes);
  std::vector<float> scale_dec(scale_f.size());
  quant::DecodeE4M3(scale_codes, scale_dec);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scale_dec[r * cols / 16 + c / 16];
      scaled[r * cols + c] = s > 0 ? W[r * cols + c] * gs / s : 0.0f;
    }
  quant::PackE2M1(scaled, packed);
  out->push_back({p + ".weight_packed", Bytes({rows, cols / 2}, core::DType::kU8, packed)});
  out->push_back({p + ".weight_scale", Bytes({rows, cols / 16}, core::DType::kF8E4M3, scale_codes)});
  out->push_back({p + ".weight_global_scale", core::Tensor::FromF32({1}, std::vector<float>{gs})});
}

// FP8 per output channel: W = fp8 * scale[r].
void AddFp8(const std::string& p, const core::Tensor& w, quant::NamedTensors* out) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const float* W = w.data<float>();
  std::vector<float> scale(rows), scaled(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    float m = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, std::abs(W[r * cols + c]));
    scale[r] = m > 0 ? m / 448.0f : 1.0f;
    for (int64_t c = 0; c < cols; ++c) scaled[r * cols + c] = W[r * cols + c] / scale[r];
  }
  std::vector<uint8_t> codes(rows * cols);
  quant::EncodeE4M3(scaled, codes);
  out->push_back({p + ".weight", Bytes({rows, cols}, core::DType::kF8E4M3, codes)});
  out->push_back({p + ".weight_scale", core::Tensor::FromF32({rows, 1}, scale)});
}

using test_support::TempDir;

std::vector<float> PrefillLogits(const std::string& dir, const std::vector<int32_t>& ids) {
  auto r = LoadCpuModel(dir, SmallOptions());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  StepPlan plan;
  plan.seqs.push_back(Seq(0, 0, ids, Pages(0, 8)));
  auto out = (*r)->Run(plan);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? std::vector<float>(out->logits.data<float>(), out->logits.data<float>() + out->logits.numel())
                  : std::vector<float>{};
}

TEST(CpuModelQuantised, Nvfp4AndFp8CheckpointEqualsItsDequantisedDenseTwin) {
  for (const std::string name : {"text_tied", "vl_untied"}) {
    SCOPED_TRACE(name);
    const std::string src_dir = GoldenDir(name);
    auto src = CheckpointWeightSource::Open(src_dir);
    ASSERT_TRUE(src.ok()) << src.status();
    const std::regex nvfp4(R"(.*(mlp\.(gate|up|down)_proj|self_attn\.[qkvo]_proj)$)");
    const std::regex fp8(R"(.*linear_attn\.(in_proj_qkv|out_proj)$)");
    quant::NamedTensors qt;
    int n_nvfp4 = 0, n_fp8 = 0;
    for (const std::string& t : src->checkpoint().files().Names()) {
      ASSERT_TRUE(src->Has(t));
      auto w = src->LoadF32(t);
      ASSERT_TRUE(w.ok()) << w.status();
      const std::string module = t.size() > 7 ? t.substr(0, t.size() - 7) : t;
      const bool quantisable = t.ends_with(".weight") && w->rank() == 2 && !t.starts_with("mtp.");
      if (quantisable && std::regex_match(module, nvfp4)) {
        AddNvfp4(module, *w, &qt);
        ++n_nvfp4;
      } else if (quantisable && std::regex_match(module, fp8)) {
        AddFp8(module, *w, &qt);
        ++n_fp8;
      } else {
        qt.push_back({t, *w});
      }
    }
    ASSERT_GT(n_nvfp4, 0);
    ASSERT_GT(n_fp8, 0);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src_dir + "/config.json"));
    cfg["quantization_config"] = nlohmann::json::parse(R"({
      "quant_method": "compressed-tensors", "format": "mixed-precision", "quantization_status": "compressed",
      "config_groups": {
        "nvfp4": {"targets": ["re:.*mlp\\..*_proj$", "re:.*self_attn\\.[qkvo]_proj$"], "format": "nvfp4-pack-quantized",
                  "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
                              "symmetric": true, "dynamic": false}},
        "fp8": {"targets": ["re:.*linear_attn\\.(in_proj_qkv|out_proj)$"], "format": "float-quantized",
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false}}},
      "ignore": ["lm_head", "re:mtp.*", "re:.*embed_tokens$", "re:.*visual.*"]})");
    TempDir qdir("q" + name), ddir("d" + name);
    std::ofstream(qdir.path() / "config.json") << cfg.dump(2);
    fs::copy_file(src_dir + "/generation_config.json", qdir.path() / "generation_config.json");
    ASSERT_TRUE(quant::WriteSafetensors((qdir.path() / "model.safetensors").string(), qt).ok());

    // The dense twin: every parameter as the quantised checkpoint dequantises it, in f32.
    auto qsrc = CheckpointWeightSource::Open(qdir.path().string());
    ASSERT_TRUE(qsrc.ok()) << qsrc.status();
    EXPECT_EQ(qsrc->checkpoint().FindModule(std::string(name == "text_tied" ? "model" : "model.language_model") +
                                            ".layers.0.mlp.down_proj")->FormatName(), "nvfp4");
    quant::NamedTensors dense;
    for (const std::string& t : src->checkpoint().files().Names()) {
      auto w = qsrc->LoadF32(t);
      ASSERT_TRUE(w.ok()) << t << ": " << w.status();
      dense.push_back({t, *w});
    }
    cfg.erase("quantization_config");
    std::ofstream(ddir.path() / "config.json") << cfg.dump(2);
    ASSERT_TRUE(quant::WriteSafetensors((ddir.path() / "model.safetensors").string(), dense).ok());

    const Golden g = LoadGolden(name);
    const std::vector<float> q = PrefillLogits(qdir.path().string(), g.ids);
    const std::vector<float> d = PrefillLogits(ddir.path().string(), g.ids);
    ASSERT_EQ(q.size(), g.logits.size());
    ASSERT_EQ(d.size(), q.size());
    EXPECT_LE(MaxAbsDiff(q.data(), d.data(), q.size()), 1e-6);
    // Quantisation did change the weights (the test would be vacuous otherwise). NVFP4 costs ~10%
    // rms per weight, which these tiny random models amplify to ~0.6 of the largest logit; a
    // misread scale (a multiplier taken for a divisor) would be orders of magnitude off.
    const double drift = RelErr(q.data(), g.logits.data(), q.size());
    EXPECT_GT(drift, 1e-3);
    EXPECT_LT(drift, 1.5);
  }
}

// bf16 and f16 checkpoints load (widened to f32) and stay close to the f32 reference logits.
TEST(CpuModelQuantised, HalfPrecisionCheckpointsLoad) {
  const std::string src_dir = GoldenDir("vl_tied");
  auto src = CheckpointWeightSource::Open(src_dir);
  ASSERT_TRUE(src.ok()) << src.status();
  const Golden g = LoadGolden("vl_tied");
  std::vector<double> errs;
  for (const core::DType dt : {core::DType::kBF16, core::DType::kF16}) {
    SCOPED_TRACE(std::string(core::DTypeName(dt)));
    quant::NamedTensors half;
    for (const std::string& t : src->checkpoint().files().Names()) {
      auto w = src->LoadF32(t);
      ASSERT_TRUE(w.ok());
      core::Tensor h = core::Tensor::Empty(w->shape(), dt);
      for (int64_t i = 0; i < w->numel(); ++i) {
        const float x = w->data<float>()[i];
        h.data<uint16_t>()[i] = dt == core::DType::kBF16 ? core::F32ToBf16(x) : core::F32ToF16(x);
      }
      half.push_back({t, h});
    }
    TempDir dir(std::string(core::DTypeName(dt)));
    fs::copy_file(src_dir + "/config.json", dir.path() / "config.json");
    ASSERT_TRUE(quant::WriteSafetensors((dir.path() / "model.safetensors").string(), half).ok());
    const std::vector<float> logits = PrefillLogits(dir.path().string(), g.ids);
    ASSERT_EQ(logits.size(), g.logits.size());
    const double err = RelErr(logits.data(), g.logits.data(), logits.size());
    EXPECT_GT(err, 0.0);
    EXPECT_LT(err, 0.1);  // these random tiny models amplify weight rounding ~20x
    errs.push_back(err);
  }
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_LT(errs[1], errs[0] / 2);  // f16 keeps 3 more mantissa bits than bf16
}

}  // namespace
}  // namespace sparkserve::model
