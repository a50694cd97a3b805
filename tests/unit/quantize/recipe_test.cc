// Recipes: built-in schemes per module, JSON rules (order, base, exact names, regexes) and errors.
#include "quant/quantizer/recipe.h"

#include "gtest/gtest.h"

namespace sparkserve::quant {
namespace {

using S = WeightScheme;

TEST(Recipe, Nvfp4MixedAssignsTheIssueSchemes) {
  auto r = Recipe::BuiltIn("nvfp4-mixed");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* prefix : {"model.", "model.language_model."}) {
    const std::string p = std::string(prefix) + "layers.7.";
    EXPECT_EQ(r->SchemeFor(p + "mlp.gate_proj"), S::kNvfp4);
    EXPECT_EQ(r->SchemeFor(p + "mlp.down_proj"), S::kNvfp4);
    EXPECT_EQ(r->SchemeFor(p + "self_attn.q_proj"), S::kNvfp4);
    EXPECT_EQ(r->SchemeFor(p + "self_attn.o_proj"), S::kNvfp4);
    EXPECT_EQ(r->SchemeFor(p + "linear_attn.in_proj_qkv"), S::kFp8);
    EXPECT_EQ(r->SchemeFor(p + "linear_attn.in_proj_z"), S::kFp8);
    EXPECT_EQ(r->SchemeFor(p + "linear_attn.out_proj"), S::kFp8);
    EXPECT_EQ(r->SchemeFor(p + "linear_attn.in_proj_a"), S::kDense);
    EXPECT_EQ(r->SchemeFor(p + "linear_attn.in_proj_b"), S::kDense);
  }
  EXPECT_EQ(r->SchemeFor("lm_head"), S::kFp8);
  EXPECT_EQ(r->SchemeFor("mtp.layers.0.mlp.gate_proj"), S::kDense);
  EXPECT_EQ(r->SchemeFor("mtp.fc"), S::kDense);
  EXPECT_EQ(r->SchemeFor("model.visual.blocks.0.mlp.fc1"), S::kDense);
}

TEST(Recipe, Nvfp4AndFp8CoverEveryDecoderLinearOnly) {
  auto nv = Recipe::BuiltIn("nvfp4");
  auto f8 = Recipe::BuiltIn("fp8");
  ASSERT_TRUE(nv.ok() && f8.ok());
  EXPECT_EQ(nv->SchemeFor("model.layers.0.linear_attn.in_proj_a"), S::kNvfp4);
  EXPECT_EQ(nv->SchemeFor("model.layers.0.linear_attn.in_proj_qkv"), S::kNvfp4);
  EXPECT_EQ(f8->SchemeFor("model.layers.0.mlp.up_proj"), S::kFp8);
  EXPECT_EQ(nv->SchemeFor("lm_head"), S::kDense);
  EXPECT_EQ(f8->SchemeFor("mtp.layers.0.self_attn.q_proj"), S::kDense);
  auto bf16 = Recipe::BuiltIn("bf16");
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->SchemeFor("model.layers.0.mlp.up_proj"), S::kDense);
}

TEST(Recipe, JsonRulesComeFirstInFileOrderThenTheBase) {
  auto r = Recipe::FromJson(R"({"rules": {"model.layers.1.mlp.up_proj": "dense",
                                          "re:.*mlp\\.(up|down)_proj$": "fp8",
                                          "re:.*mlp\\..*": "nvfp4"},
                                "base": "nvfp4-mixed"})",
                            "r.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->SchemeFor("model.layers.1.mlp.up_proj"), S::kDense);
  EXPECT_EQ(r->SchemeFor("model.layers.2.mlp.up_proj"), S::kFp8);
  EXPECT_EQ(r->SchemeFor("mtp.layers.0.mlp.gate_proj"), S::kNvfp4);
  EXPECT_EQ(r->SchemeFor("model.layers.2.linear_attn.out_proj"), S::kFp8);  // from the base
  EXPECT_EQ(r->SchemeFor("lm_head"), S::kFp8);
  // re: is anchored at the start only (Python re.match).
  auto anchored = Recipe::FromJson(R"({"rules": {"re:mlp": "fp8"}})", "a.json");
  ASSERT_TRUE(anchored.ok());
  EXPECT_EQ(anchored->SchemeFor("model.layers.0.mlp.up_proj"), S::kDense);
  EXPECT_EQ(anchored->SchemeFor("mlp.x"), S::kFp8);
}

TEST(Recipe, BadRecipesGiveClearErrors) {
  auto unknown_key = Recipe::FromJson(R"({"rulez": {}})", "r.json");
  ASSERT_FALSE(unknown_key.ok());
  EXPECT_NE(std::string(unknown_key.status().message()).find("unknown recipe key \"rulez\""), std::string::npos)
      << unknown_key.status();
  auto bad_scheme = Recipe::FromJson(R"({"rules": {"lm_head": "int4"}})", "r.json");
  ASSERT_FALSE(bad_scheme.ok());
  EXPECT_NE(std::string(bad_scheme.status().message()).find("unknown scheme \"int4\""), std::string::npos);
  auto bad_regex = Recipe::FromJson(R"({"rules": {"re:(": "fp8"}})", "r.json");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(std::string(bad_regex.status().message()).find("invalid regex"), std::string::npos);
  auto bad_base = Recipe::FromJson(R"({"base": "int8"})", "r.json");
  ASSERT_FALSE(bad_base.ok());
  EXPECT_NE(std::string(bad_base.status().message()).find("unknown recipe \"int8\""), std::string::npos);
  EXPECT_FALSE(Recipe::FromJson("[1]", "r.json").ok());
  EXPECT_FALSE(Recipe::FromJson("{", "r.json").ok());
  auto unknown = Recipe::Load("nvfp5");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("nvfp4-mixed"), std::string::npos);
  EXPECT_EQ(Recipe::Load("/nonexistent/recipe.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sparkserve::quant
