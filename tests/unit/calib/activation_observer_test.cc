// The activation observer of the CPU runner: it sees every Linear module's input (names as in the
// checkpoint, one row per token) and the K/V written to the cache, with maxima equal to ones
// computed directly from the weights and the runner's own outputs; attaching it changes no logit.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "gtest/gtest.h"
#include "model/activation_observer.h"
#include "calib/calibration.h"
#include "model/cpu/cpu_model_loader.h"
#include "head/demo/demo_model.h"
#include "quant/checkpoint.h"

namespace sparkserve::calib {
namespace {

using namespace model;       // NOLINT: the observer and plan types under test
using namespace model::cpu;  // NOLINT
using head::DemoModelOptions;
using head::WriteDemoModel;

namespace fs = std::filesystem;

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("sparkserve_observer_test_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    DemoModelOptions o;
    o.seed = 5;
    o.progress = false;
    ASSERT_TRUE(WriteDemoModel(dir_->string(), o).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
};
fs::path* TinyModel::dir_ = nullptr;

const std::vector<int32_t> kIds = {3, 17, 250, 41, 41, 99, 7, 300, 12, 5, 64, 128, 200, 1, 2, 77, 400, 33, 9};

// Zero-centred RMSNorm of one row in double: x / rms(x) * (1 + w).
std::vector<double> RmsNormRow(const float* x, const float* w, int64_t d, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
  std::vector<double> out(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) out[static_cast<size_t>(i)] = x[i] * inv * (1.0 + w[i]);
  return out;
}

TEST_F(TinyModel, ObservesEveryLinearInputWithDirectlyComputedMaxima) {
  auto runner = LoadCpuModel(dir_->string(), SingleSequenceRunnerOptions(64));
  ASSERT_TRUE(runner.ok()) << runner.status();
  CpuModelRunner& r = **runner;
  AbsMaxObserver obs;
  ASSERT_TRUE(ObserveSamples(r, {kIds}, obs).ok());
  const auto amax = obs.input_amax();
  const auto rows = obs.input_rows();
  const int64_t T = static_cast<int64_t>(kIds.size());

  // Every Linear module of the checkpoint (2-D weights but the embedding) plus the tied lm_head.
  auto ckpt = quant::Checkpoint::Open(dir_->string());
  ASSERT_TRUE(ckpt.ok());
  std::set<std::string> expected = {"lm_head"};
  for (const std::string& n : ckpt->files().Names()) {
    const auto* e = ckpt->files().Find(n);
    if (e->shape.size() == 2 && n.size() > 7 && n.substr(n.size() - 7) == ".weight" &&
        n.find("embed_tokens") == std::string::npos)
      expected.insert(n.substr(0, n.size() - 7));
  }
  std::set<std::string> seen;
  for (const auto& [m, v] : amax) seen.insert(m);
  EXPECT_EQ(seen, expected);
  for (const auto& [m, n] : rows) {
    // The text model sees each token once per module; the MTP block (and the shared lm_head again)
    // sees the T - 1 (token, next token) pairs.
    const int64_t want = m == "lm_head" ? 2 * T - 1 : m.rfind("mtp.", 0) == 0 ? T - 1 : T;
    EXPECT_EQ(n, want) << m;
    EXPECT_GT(amax.at(m), 0.0f) << m;
  }

  // Layer 0's projections take input_layernorm(embedding) directly.
  const auto& cfg = r.config();
  const int64_t d = cfg.hidden_size;
  const auto& w = r.weights();
  double want0 = 0;
  for (int32_t id : kIds) {
    const auto row = RmsNormRow(w.embed_tokens.data<float>() + id * d, w.layers[0].input_layernorm.data<float>(), d,
                                cfg.rms_norm_eps);
    for (double v : row) want0 = std::max(want0, std::fabs(v));
  }
  ASSERT_EQ(cfg.layer_types[0], LayerType::kLinearAttention);
  for (const char* m : {"in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b"}) {
    EXPECT_NEAR(amax.at(std::string("model.layers.0.linear_attn.") + m), want0, 1e-5 * want0) << m;
  }

  // lm_head takes the final-normed hidden the runner returns; the MTP fc takes
  // cat(norm(embedding of token t+1), norm(hidden at t)).
  StepPlan plan;
  SeqWork s;
  s.tokens = kIds;
  s.kv_pages = {0, 1, 2, 3};
  s.logits = LogitsWanted::kAll;
  plan.seqs.push_back(s);
  auto fresh = LoadCpuModel(dir_->string(), SingleSequenceRunnerOptions(64));
  ASSERT_TRUE(fresh.ok());
  auto out = (*fresh)->Run(plan);
  ASSERT_TRUE(out.ok());
  double want_head = 0;
  for (int64_t i = 0; i < out->hidden.numel(); ++i)
    want_head = std::max(want_head, std::fabs(static_cast<double>(out->hidden.data<float>()[i])));
  EXPECT_GE(amax.at("lm_head"), static_cast<float>(want_head));  // also sees the MTP rows
  double want_fc = 0;
  for (int64_t t = 0; t + 1 < T; ++t) {
    const auto e = RmsNormRow(w.embed_tokens.data<float>() + kIds[static_cast<size_t>(t + 1)] * d,
                              w.mtp.pre_fc_norm_embedding.data<float>(), d, cfg.rms_norm_eps);
    const auto h = RmsNormRow(out->hidden.data<float>() + t * d, w.mtp.pre_fc_norm_hidden.data<float>(), d,
                              cfg.rms_norm_eps);
    for (double v : e) want_fc = std::max(want_fc, std::fabs(v));
    for (double v : h) want_fc = std::max(want_fc, std::fabs(v));
  }
  EXPECT_NEAR(amax.at("mtp.fc"), want_fc, 1e-5 * want_fc);
}

TEST_F(TinyModel, KvMaximaAreThoseOfTheCacheContents) {
  auto runner = LoadCpuModel(dir_->string(), SingleSequenceRunnerOptions(64));
  ASSERT_TRUE(runner.ok());
  CpuModelRunner& r = **runner;
  AbsMaxObserver obs;
  ASSERT_TRUE(ObserveSamples(r, {kIds}, obs).ok());
  const auto kv = obs.kv_amax();
  std::set<std::string> names;
  for (const auto& [n, v] : kv) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"model.layers.3.self_attn", "mtp.layers.0.self_attn"}));
  // The cache started zeroed and holds exactly the sample's rows now.
  const int32_t layer3 = r.state().kv_index(3);
  ASSERT_GE(layer3, 0);
  const auto& k3 = r.state().kv(layer3);
  EXPECT_EQ(kv.at("model.layers.3.self_attn").first, AbsMax(k3.k.data<float>(), k3.k.numel()));
  EXPECT_EQ(kv.at("model.layers.3.self_attn").second, AbsMax(k3.v.data<float>(), k3.v.numel()));
  const auto& km = r.state().mtp_kv();
  EXPECT_EQ(kv.at("mtp.layers.0.self_attn").first, AbsMax(km.k.data<float>(), km.k.numel()));
  EXPECT_EQ(kv.at("mtp.layers.0.self_attn").second, AbsMax(km.v.data<float>(), km.v.numel()));
  EXPECT_GT(kv.at("model.layers.3.self_attn").first, 0.0f);
}

TEST_F(TinyModel, ObservingChangesNoLogitAndMaximaAccumulate) {
  auto a = LoadCpuModel(dir_->string(), SingleSequenceRunnerOptions(64));
  auto b = LoadCpuModel(dir_->string(), SingleSequenceRunnerOptions(64));
  ASSERT_TRUE(a.ok() && b.ok());
  auto plain = SampleLogProbs(**a, kIds);
  AbsMaxObserver obs;
  (*b)->set_activation_observer(&obs);
  auto observed = SampleLogProbs(**b, kIds);
  (*b)->set_activation_observer(nullptr);
  ASSERT_TRUE(plain.ok() && observed.ok());
  ASSERT_EQ(plain->numel(), observed->numel());
  EXPECT_EQ(0, std::memcmp(plain->raw_data(), observed->raw_data(), plain->nbytes()));
  // KL of a model against itself is exactly 0 and its top-1 agrees everywhere.
  auto same = CompareLogProbs(*plain, *observed);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->kl_sum, 0.0);
  EXPECT_EQ(same->top1_same, same->positions);
  EXPECT_EQ(same->positions, static_cast<int64_t>(kIds.size()));
  // Two samples: the maxima are the max of each sample's maxima.
  const std::vector<int32_t> other = {8, 9, 10, 11, 300, 301, 302};
  AbsMaxObserver o1, o2, both;
  ASSERT_TRUE(ObserveSamples(**a, {kIds}, o1).ok());
  ASSERT_TRUE(ObserveSamples(**a, {other}, o2).ok());
  ASSERT_TRUE(ObserveSamples(**a, {kIds, other}, both).ok());
  for (const auto& [m, v] : both.input_amax()) EXPECT_EQ(v, std::max(o1.input_amax().at(m), o2.input_amax().at(m))) << m;
  // Mismatched shapes are an error, not a number.
  EXPECT_FALSE(CompareLogProbs(*plain, plain->Slice(0, 2)).ok());
}

}  // namespace
}  // namespace sparkserve::calib
