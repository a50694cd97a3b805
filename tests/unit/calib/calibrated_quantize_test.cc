// Calibrated quantisation end to end on the tiny demo model: every NVFP4 module's input_global_scale
// is 448 * 6 / amax of its inputs as an independent observer pass over the same samples sees them,
// k/v scales are amax / 448 with kv_cache_scheme set, our reader loads the output, and the held-out
// evaluation orders recipes by precision (dense = 0 < fp8 < nvfp4) with high top-1 agreement.
#include <cmath>
#include <filesystem>

#include "gtest/gtest.h"
#include "calib/calibrated_quantize.h"
#include "calib/calibration_corpus.h"
#include "quant/quantizer/quantize_checkpoint.h"
#include "calib/activation_fake_quant.h"
#include "model/cpu/cpu_model_loader.h"
#include "quant/checkpoint.h"
#include "tests/unit/calib/temp_model.h"

namespace sparkserve::calib {
namespace {

using testing::TempDir;

size_t Nvfp4Modules(const quant::QuantizeReport& r) {
  size_t n = 0;
  for (const auto& m : r.modules) n += m.scheme == quant::WeightScheme::kNvfp4;
  return n;
}

class CalibratedQuantize : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    testing::WriteTinyModel(*tmp_ / "src");
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string Src() { return *tmp_ / "src"; }

  static quant::QuantizeOptions Options() {
    quant::QuantizeOptions o;
    o.tie_word_embeddings = true;  // the demo model's head is tied
    o.progress = false;
    o.threads = 2;
    return o;
  }
  static absl::StatusOr<CalibratedQuantizeResult> Run(const std::string& out, const std::string& recipe,
                                                      const CalibrationOptions& c = {}) {
    auto r = quant::Recipe::BuiltIn(recipe);
    if (!r.ok()) return r.status();
    return CalibrateAndQuantize(Src(), out, *r, Options(), c);
  }
  static TempDir* tmp_;
};
TempDir* CalibratedQuantize::tmp_ = nullptr;

TEST_F(CalibratedQuantize, Nvfp4MixedScalesAreThoseOfTheObservedInputs) {
  TempDir out;
  CalibrationOptions c;  // built-in corpus, 8 + 2 samples
  c.max_tokens = 128;    // keeps the test fast
  auto r = Run(out / "q", "nvfp4-mixed", c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->calib_samples, 8);
  EXPECT_FALSE(r->random_ids);

  // An independent pass: the same first 8 corpus texts, tokenised and observed on the source.
  auto texts = BuiltInCalibrationTexts();
  texts.resize(8);
  TokenizeOptions topt;
  topt.max_tokens = 128;
  auto samples = TokenizeCalibrationTexts(Src(), texts, topt);
  ASSERT_TRUE(samples.ok());
  int64_t tokens = 0;
  for (const auto& s : samples->samples) tokens += static_cast<int64_t>(s.size());
  EXPECT_EQ(r->calib_tokens, tokens);
  auto source = model::cpu::LoadCpuModel(Src(), calib::SingleSequenceRunnerOptions(512));
  ASSERT_TRUE(source.ok());
  model::AbsMaxObserver obs;
  ASSERT_TRUE(calib::ObserveSamples(**source, samples->samples, obs).ok());
  const auto amax = obs.input_amax();
  const auto kv = obs.kv_amax();

  auto ck = quant::Checkpoint::Open(out / "q");
  ASSERT_TRUE(ck.ok()) << ck.status();
  ASSERT_TRUE(ck->quantization_config().has_value());
  EXPECT_TRUE(ck->quantization_config()->kv_cache_scheme.has_value());
  size_t nvfp4 = 0;
  for (const quant::ModuleReport& m : r->report.modules) {
    const quant::QuantizedLinear* q = ck->FindModule(m.name);
    ASSERT_NE(q, nullptr) << m.name;
    if (m.scheme != quant::WeightScheme::kNvfp4) {
      EXPECT_FALSE(q->input_global_scale.defined()) << m.name;
      continue;
    }
    ++nvfp4;
    ASSERT_TRUE(q->input_global_scale.defined()) << m.name;
    ASSERT_TRUE(amax.count(m.name)) << m.name;
    EXPECT_EQ(q->input_global_scale.data<float>()[0], 448.0f * 6.0f / amax.at(m.name)) << m.name;
  }
  EXPECT_GT(nvfp4, 0u);
  EXPECT_EQ(r->w4a4_modules, nvfp4);
  ASSERT_EQ(kv.size(), 2u);  // the full-attention layer and the MTP layer
  EXPECT_EQ(r->kv_layers, 2u);
  for (const auto& [attn, m] : kv) {
    auto k = ck->DenseF32(attn + ".k_scale");
    auto v = ck->DenseF32(attn + ".v_scale");
    ASSERT_TRUE(k.ok() && v.ok()) << attn;
    EXPECT_EQ(k->data<float>()[0], m.first / 448.0f) << attn;
    EXPECT_EQ(v->data<float>()[0], m.second / 448.0f) << attn;
  }
  // The output runs, and stays close to the source on the held-out samples.
  ASSERT_TRUE(r->eval.has_value());
  EXPECT_EQ(r->eval_samples, 2);
  EXPECT_GT(r->eval->positions, 20);
  EXPECT_TRUE(std::isfinite(r->eval->mean_kl()));
  EXPECT_GT(r->eval->mean_kl(), 0.0);
  EXPECT_LT(r->eval->mean_kl(), 0.05);
  EXPECT_GE(r->eval->top1(), 0.9);
  EXPECT_NE(FormatCalibrationSummary(*r).find("top-1 agreement"), std::string::npos);
  // The simulated W4A4 + FP8 KV evaluation covers every calibrated module and attention layer.
  ASSERT_TRUE(r->eval_activations.has_value());
  EXPECT_EQ(r->simulated_inputs, nvfp4);
  EXPECT_EQ(r->simulated_kv, 2u);
  EXPECT_EQ(r->eval_activations->positions, r->eval->positions);
  EXPECT_TRUE(std::isfinite(r->eval_activations->mean_kl()));
  EXPECT_LT(r->eval_activations->mean_kl(), 0.05);
  EXPECT_GE(r->eval_activations->top1(), 0.9);
}

// The activation scales matter: an output whose input_global_scale comes from maxima 1000x too small
// (every group scale saturates, inputs clip) is much further from the source under W4A4 simulation
// than the calibrated one, while its weights-only logits are the same.
TEST_F(CalibratedQuantize, MiscalibratedActivationScalesHurtOnlyUnderW4A4) {
  TempDir out;
  CalibrationOptions c;
  c.samples = 3;
  c.max_tokens = 64;
  c.eval_max_tokens = 96;
  auto good = Run(out / "good", "nvfp4", c);
  ASSERT_TRUE(good.ok()) << good.status();
  quant::QuantizeOptions o = Options();
  o.calibration = good->scales;
  for (auto& [m, a] : o.calibration.input_amax) a /= 1000.0f;
  auto recipe = quant::Recipe::BuiltIn("nvfp4");
  ASSERT_TRUE(quant::QuantizeCheckpoint(Src(), out / "bad", *recipe, o).ok());
  // Evaluate the bad output on the same held-out sample as `good` did: the 4th corpus text.
  auto texts = BuiltInCalibrationTexts();
  TokenizeOptions topt;
  topt.max_tokens = 96;
  auto held = TokenizeCalibrationTexts(Src(), {texts[3]}, topt);
  ASSERT_TRUE(held.ok());
  auto eval = [&](const std::string& dir) -> std::pair<double, double> {
    auto src = model::cpu::LoadCpuModel(Src(), calib::SingleSequenceRunnerOptions(96));
    auto q = model::cpu::LoadCpuModel(dir, calib::SingleSequenceRunnerOptions(96));
    auto ck = quant::Checkpoint::Open(dir);
    EXPECT_TRUE(src.ok() && q.ok() && ck.ok());
    auto sim = calib::QuantizedActivationSimulator::FromCheckpoint(*ck);
    EXPECT_TRUE(sim.ok());
    auto ref = calib::SampleLogProbs(**src, held->samples[0]);
    auto w = calib::SampleLogProbs(**q, held->samples[0]);
    (*q)->set_activation_observer(sim->get());
    auto wa = calib::SampleLogProbs(**q, held->samples[0]);
    (*q)->set_activation_observer(nullptr);
    auto kw = calib::CompareLogProbs(*ref, *w);
    auto ka = calib::CompareLogProbs(*ref, *wa);
    return {kw->mean_kl(), ka->mean_kl()};
  };
  const auto [good_w, good_a] = eval(out / "good");
  const auto [bad_w, bad_a] = eval(out / "bad");
  EXPECT_EQ(good_w, bad_w);       // the same weights
  EXPECT_GT(bad_a, 3 * good_a);   // clipped activations
  EXPECT_GT(good_a, 0.0);
}

TEST_F(CalibratedQuantize, KlOrdersRecipesByPrecision) {
  TempDir out;
  CalibrationOptions c;
  c.samples = 2;
  c.max_tokens = 64;
  c.eval_max_tokens = 128;
  auto nvfp4 = Run(out / "nvfp4", "nvfp4", c);
  c.calibrate = false;  // no NVFP4 module: only the evaluation matters
  auto dense = Run(out / "bf16", "bf16", c);
  auto fp8 = Run(out / "fp8", "fp8", c);
  ASSERT_TRUE(dense.ok() && fp8.ok() && nvfp4.ok());
  ASSERT_TRUE(dense->eval && fp8->eval && nvfp4->eval);
  EXPECT_EQ(dense->eval->kl_sum, 0.0);  // the same weights: identical logits
  EXPECT_EQ(dense->eval->top1_same, dense->eval->positions);
  EXPECT_GT(fp8->eval->mean_kl(), 0.0);
  EXPECT_GT(nvfp4->eval->mean_kl(), fp8->eval->mean_kl());
  EXPECT_GE(fp8->eval->top1(), nvfp4->eval->top1() - 0.02);
}

TEST_F(CalibratedQuantize, NoCalibIsWeightOnlyAndNoEvalSkipsTheComparison) {
  TempDir out;
  CalibrationOptions c;
  c.calibrate = false;
  c.evaluate = false;
  auto r = Run(out / "q", "nvfp4-mixed", c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->eval.has_value());
  EXPECT_EQ(r->calib_samples, 0);
  EXPECT_EQ(r->w4a4_modules, 0u);
  auto ck = quant::Checkpoint::Open(out / "q");
  ASSERT_TRUE(ck.ok());
  EXPECT_FALSE(ck->quantization_config()->kv_cache_scheme.has_value());
  for (const auto& [name, m] : ck->modules()) EXPECT_FALSE(m.input_global_scale.defined()) << name;
  EXPECT_NE(FormatCalibrationSummary(*r).find("not run"), std::string::npos);
  // Without calibration the evaluation still runs when asked for.
  c.evaluate = true;
  auto e = Run(out / "q2", "nvfp4-mixed", c);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->eval.has_value());
}

TEST_F(CalibratedQuantize, CalibFileTextAndJsonl) {
  TempDir out;
  testing::WriteFile(out / "c.txt", "One paragraph of text.\n\nAnother paragraph here.\n\nA third.\n\nFourth.\n");
  CalibrationOptions c;
  c.calib_file = out / "c.txt";
  c.samples = 3;
  c.eval_samples = 1;
  auto t = Run(out / "qt", "nvfp4-mixed", c);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->calib_samples, 3);
  EXPECT_EQ(t->eval_samples, 1);
  EXPECT_EQ(t->w4a4_modules, Nvfp4Modules(t->report));
  testing::WriteFile(out / "c.jsonl",
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"hello there\"}, {\"role\": \"assistant\", "
                     "\"content\": \"hi, how can I help?\"}]}\n"
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"bye\"}]}\n");
  c.calib_file = out / "c.jsonl";
  auto j = Run(out / "qj", "nvfp4-mixed", c);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->calib_samples, 1);  // two chats: one calibrates, one is held out
  EXPECT_EQ(j->eval_samples, 1);
  EXPECT_EQ(j->warnings.size(), 1u);  // fewer samples than --calib-samples
}

TEST_F(CalibratedQuantize, NoTokenizerCalibratesOnRandomIdsWithAWarning) {
  TempDir out;
  namespace fs = std::filesystem;
  fs::create_directories(out / "src");
  for (const auto& e : fs::directory_iterator(Src())) {
    if (e.path().filename() != "tokenizer.json") fs::copy_file(e.path(), out.path() / "src" / e.path().filename());
  }
  auto recipe = quant::Recipe::BuiltIn("nvfp4-mixed");
  auto r = CalibrateAndQuantize(out / "src", out / "q", *recipe, Options(), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->random_ids);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("random token ids"), std::string::npos);
  EXPECT_EQ(r->w4a4_modules, Nvfp4Modules(r->report));
  EXPECT_NE(FormatCalibrationSummary(*r).find("random ids"), std::string::npos);
}

TEST_F(CalibratedQuantize, BadInputFailsBeforeCalibrating) {
  TempDir out;
  CalibrationOptions c;
  c.samples = 0;
  EXPECT_FALSE(Run(out / "a", "nvfp4-mixed", c).ok());
  c = {};
  c.calib_file = out / "missing.txt";
  auto missing = Run(out / "b", "nvfp4-mixed", c);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("missing.txt"), std::string::npos);
  std::filesystem::create_directories(out / "full");
  testing::WriteFile(out / "full/x", "x");
  auto full = Run(out / "full", "nvfp4-mixed", {});
  ASSERT_FALSE(full.ok());
  EXPECT_NE(std::string(full.status().message()).find("not empty"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out / "b"));
}

}  // namespace
}  // namespace sparkserve::calib
