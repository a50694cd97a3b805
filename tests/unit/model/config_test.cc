// Tests for model/config: both checkpoint layouts, derived layer types, nulls and defaults,
// generation_config.json, and clear errors for bad input.
#include "model/config.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace sparkserve::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

// Qwen3.5-4B's config.json, reconstructed from public copies of released Qwen3.5 configs: their field
// set and nesting (text_config with rope_parameters, top-level and nested tie_word_embeddings,
// vision_config) with the 4B's values from FORMATS.md §1. Not byte-identical to the Hub file.
constexpr const char* kQwen35_4B = R"json({
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "image_token_id": 248056,
  "model_type": "qwen3_5",
  "text_config": {
    "attention_bias": false,
    "attention_dropout": 0.0,
    "attn_output_gate": true,
    "dtype": "bfloat16",
    "eos_token_id": 248044,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 9216,
    "layer_types": [
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"
    ],
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "mamba_ssm_dtype": "float32",
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_5_text",
    "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": false,
    "num_attention_heads": 16,
    "num_hidden_layers": 32,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
      "mrope_interleaved": true,
      "mrope_section": [11, 11, 10],
      "partial_rotary_factor": 0.25,
      "rope_theta": 10000000,
      "rope_type": "default"
    },
    "tie_word_embeddings": true,
    "use_cache": true,
    "vocab_size": 248320
  },
  "tie_word_embeddings": true,
  "transformers_version": "4.57.0.dev0",
  "video_token_id": 248057,
  "vision_config": {
    "deepstack_visual_indexes": [],
    "depth": 24,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 1024,
    "in_channels": 3,
    "initializer_range": 0.02,
    "intermediate_size": 4096,
    "model_type": "qwen3_5",
    "num_heads": 16,
    "num_position_embeddings": 2304,
    "out_hidden_size": 2560,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2
  },
  "vision_end_token_id": 248054,
  "vision_start_token_id": 248053
})json";

// generation_config.json in the released shape (eos list, sampling defaults); values illustrative.
constexpr const char* kQwen35Generation = R"json({
  "bos_token_id": 248044,
  "do_sample": true,
  "eos_token_id": [248046, 248044],
  "pad_token_id": 248044,
  "temperature": 1.0,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.57.0.dev0"
})json";

// A small flat (qwen3_5_text) config with only the required fields.
json SmallFlat() {
  return json{{"architectures", {"Qwen3_5ForCausalLM"}},
              {"model_type", "qwen3_5_text"},
              {"hidden_size", 64},
              {"num_hidden_layers", 4},
              {"intermediate_size", 128},
              {"vocab_size", 1000},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"head_dim", 16},
              {"linear_num_key_heads", 2},
              {"linear_num_value_heads", 4},
              {"linear_key_head_dim", 8},
              {"linear_value_head_dim", 8},
              {"linear_conv_kernel_dim", 4},
              {"rope_parameters", {{"rope_theta", 10000}, {"partial_rotary_factor", 0.5},
                                   {"mrope_section", {2, 1, 1}}}}};
}

absl::StatusOr<Qwen35Config> Parse(const json& j) { return ParseQwen35Config(j.dump(), "test/config.json"); }

TEST(Qwen35ConfigTest, RealQwen35_4BNestedLayout) {
  absl::StatusOr<Qwen35Config> c = ParseQwen35Config(kQwen35_4B);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, CheckpointLayout::kConditionalGeneration);
  EXPECT_EQ(c->model_type, "qwen3_5");
  EXPECT_EQ(c->architecture, "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c->weight_prefix(), "model.language_model.");
  EXPECT_EQ(c->hidden_size, 2560);
  EXPECT_EQ(c->num_hidden_layers, 32);
  EXPECT_EQ(c->intermediate_size, 9216);
  EXPECT_EQ(c->vocab_size, 248320);
  EXPECT_EQ(c->num_attention_heads, 16);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->linear_num_key_heads, 16);
  EXPECT_EQ(c->linear_num_value_heads, 32);
  EXPECT_EQ(c->linear_key_head_dim, 128);
  EXPECT_EQ(c->linear_value_head_dim, 128);
  EXPECT_EQ(c->linear_conv_kernel_dim, 4);
  ASSERT_EQ(c->layer_types.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(c->is_full_attention(i), i % 4 == 3) << i;
  EXPECT_EQ(c->num_full_attention_layers(), 8);
  EXPECT_EQ(c->LayerPattern(), "LLLF x8");
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope.rope_type, "default");
  EXPECT_DOUBLE_EQ(c->rope.theta, 1e7);
  EXPECT_DOUBLE_EQ(c->rope.partial_rotary_factor, 0.25);
  EXPECT_THAT(c->rope.mrope_section, ElementsAre(11, 11, 10));
  EXPECT_TRUE(c->rope.mrope_interleaved);
  EXPECT_EQ(c->rotary_dim(), 64);
  EXPECT_TRUE(c->attn_output_gate);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->max_position_embeddings, 262144);
  EXPECT_EQ(c->mtp_num_hidden_layers, 1);
  EXPECT_EQ(c->dtype, core::DType::kBF16);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(248044));
  EXPECT_TRUE(c->quantization_config_json.empty());
  EXPECT_FALSE(c->generation.has_value());
  EXPECT_THAT(c->stop_token_ids(), ElementsAre(248044));
}

TEST(Qwen35ConfigTest, FlatLayoutWithLegacyRopeFields) {
  json j = SmallFlat();
  j.erase("rope_parameters");
  j["rope_theta"] = 5e6;
  j["partial_rotary_factor"] = 0.25;
  j["rope_scaling"] = {{"type", "default"}, {"mrope_section", {1, 1, 0}}, {"mrope_interleaved", false}};
  j["torch_dtype"] = "float16";
  j["eos_token_id"] = {7, 9};
  j["tie_word_embeddings"] = true;
  j["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "mixed-precision"}};
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, CheckpointLayout::kCausalLM);
  EXPECT_EQ(c->weight_prefix(), "model.");
  EXPECT_DOUBLE_EQ(c->rope.theta, 5e6);
  EXPECT_DOUBLE_EQ(c->rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(c->rotary_dim(), 4);
  EXPECT_THAT(c->rope.mrope_section, ElementsAre(1, 1, 0));
  EXPECT_FALSE(c->rope.mrope_interleaved);
  EXPECT_EQ(c->dtype, core::DType::kF16);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(7, 9));
  EXPECT_TRUE(c->tie_word_embeddings);
  ASSERT_FALSE(c->quantization_config_json.empty());
  EXPECT_EQ(json::parse(c->quantization_config_json), j["quantization_config"]);
}

TEST(Qwen35ConfigTest, RopeDictValuesWinOverTopLevelAndRopeScalingWinsOverRopeParameters) {
  json j = SmallFlat();
  j["rope_theta"] = 1.0;  // the dict's 10000 wins
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->rope.theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->rope.partial_rotary_factor, 0.5);

  j["rope_scaling"] = {{"rope_theta", 777}, {"partial_rotary_factor", 0.25}, {"mrope_section", {2, 0, 0}}};
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->rope.theta, 777.0);
  EXPECT_EQ(c->rotary_dim(), 4);
  EXPECT_THAT(c->rope.mrope_section, ElementsAre(2, 0, 0));
}

TEST(Qwen35ConfigTest, YarnRope) {
  json j = SmallFlat();
  j["rope_parameters"]["rope_type"] = "yarn";
  j["rope_parameters"]["factor"] = 4;
  j["rope_parameters"]["original_max_position_embeddings"] = 262144;
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope.rope_type, "yarn");
  EXPECT_DOUBLE_EQ(c->rope.factor.value(), 4.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings.value(), 262144);
}

TEST(Qwen35ConfigTest, LayerTypesDerivedFromInterval) {
  json j = SmallFlat();
  j["num_hidden_layers"] = 6;
  j["full_attention_interval"] = 2;
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->LayerPattern(), "LF x3");
  EXPECT_FALSE(c->is_full_attention(0));
  EXPECT_TRUE(c->is_full_attention(1));

  // Neither layer_types nor an interval: transformers' default interval 4.
  j.erase("full_attention_interval");
  j["num_hidden_layers"] = 8;
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->LayerPattern(), "LLLF x2");

  // An explicit layer_types wins over the interval, even when they disagree.
  j["full_attention_interval"] = 4;
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "attention", "mamba"};  // legacy names remapped
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->LayerPattern(), "FFL");
}

TEST(Qwen35ConfigTest, NullOptionalFieldsGetDefaults) {
  json j = SmallFlat();
  for (const char* k : {"rms_norm_eps", "attn_output_gate", "tie_word_embeddings", "max_position_embeddings",
                        "mtp_num_hidden_layers", "dtype", "torch_dtype", "eos_token_id", "quantization_config",
                        "layer_types", "full_attention_interval", "hidden_act", "attention_bias",
                        "rope_theta", "rope_scaling"})
    j[k] = nullptr;
  j["num_hidden_layers"] = 4;
  j["rope_parameters"] = nullptr;
  j["head_dim"] = 256;  // default partial_rotary_factor 0.25 -> 64: transformers' [11, 11, 10] fits
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_TRUE(c->attn_output_gate);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->mtp_num_hidden_layers, 0);
  EXPECT_EQ(c->dtype, core::DType::kBF16);
  EXPECT_TRUE(c->eos_token_ids.empty());
  EXPECT_TRUE(c->stop_token_ids().empty());
  EXPECT_TRUE(c->quantization_config_json.empty());
  EXPECT_EQ(c->LayerPattern(), "LLLF");
  EXPECT_EQ(c->rope.rope_type, "default");
  EXPECT_DOUBLE_EQ(c->rope.theta, 10000.0);
  EXPECT_EQ(c->rotary_dim(), 64);
  EXPECT_TRUE(c->rope.mrope_section.empty());  // absent: kept absent
  absl::StatusOr<std::vector<int64_t>> split = c->MropeSectionFor3dPositions();
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(*split, ElementsAre(11, 11, 10));  // transformers' fallback
  EXPECT_TRUE(c->rope.mrope_interleaved);
}

// transformers 5.17 writes no mrope_section when its caller sets none, and its text rotary
// embedding falls back to [11, 11, 10] whatever the rotary dim; text-only positions make any
// section plain partial RoPE. So such configs load; only a 3-D (image / video) split is refused.
TEST(Qwen35ConfigTest, MropeSectionAbsentOrNotFittingLoadsAndOnlyA3dSplitIsRefused) {
  json j = SmallFlat();
  j["head_dim"] = 32;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rotary_dim(), 8);
  EXPECT_TRUE(c->rope.mrope_section.empty());
  absl::StatusOr<std::vector<int64_t>> split = c->MropeSectionFor3dPositions();
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(split.status().message(), HasSubstr("'rope_parameters.mrope_section'"));
  EXPECT_THAT(split.status().message(), HasSubstr("absent, and transformers' default [11, 11, 10] sums to 32"));
  EXPECT_THAT(split.status().message(), HasSubstr("rotary dim 8 has 4 frequency pairs"));
  EXPECT_THAT(split.status().message(), HasSubstr("images and video"));

  j["rope_parameters"]["mrope_section"] = {11, 11, 10};  // given but not fitting: kept as given
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->rope.mrope_section, ElementsAre(11, 11, 10));
  split = c->MropeSectionFor3dPositions();
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("sums to 32 but the rotary dim 8 has 4 frequency pairs"));

  j["rope_parameters"]["mrope_section"] = {3, 1};  // three components need three entries
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->MropeSectionFor3dPositions().status().message(), HasSubstr("has 2 entries; expected 3"));

  j["rope_parameters"]["mrope_section"] = {2, 1, 1};
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  split = c->MropeSectionFor3dPositions();
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(*split, ElementsAre(2, 1, 1));

  // The nested layout and the legacy dict name their own field.
  json nested = json::parse(kQwen35_4B);
  nested["text_config"]["head_dim"] = 32;
  nested["text_config"]["rope_parameters"].erase("mrope_section");
  c = Parse(nested);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->MropeSectionFor3dPositions().status().message(),
              HasSubstr("'text_config.rope_parameters.mrope_section'"));
  j.erase("rope_parameters");
  j["rope_scaling"] = {{"type", "default"}, {"mrope_section", {4, 4, 4}}};
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->MropeSectionFor3dPositions().status().message(), HasSubstr("'rope_scaling.mrope_section'"));
}

TEST(Qwen35ConfigTest, TieWordEmbeddingsPrecedence) {
  json j = json::parse(kQwen35_4B);
  j["tie_word_embeddings"] = false;  // top level wins (transformers 5)
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tie_word_embeddings);

  j.erase("tie_word_embeddings");  // only text_config says true: used
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tie_word_embeddings);

  j["text_config"].erase("tie_word_embeddings");  // neither: untied
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(Qwen35ConfigTest, NestedLayoutFallsBackToTopLevelEosDtypeAndQuantization) {
  json j = json::parse(kQwen35_4B);
  j["text_config"].erase("eos_token_id");
  j["text_config"].erase("dtype");
  j["eos_token_id"] = 248046;
  j["torch_dtype"] = "float32";
  j["text_config"]["quantization_config"] = {{"quant_method", "fp8"}};
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->eos_token_ids, ElementsAre(248046));
  EXPECT_EQ(c->dtype, core::DType::kF32);
  EXPECT_EQ(json::parse(c->quantization_config_json), (json{{"quant_method", "fp8"}}));
}

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  const char* field;    // must appear in the message
  const char* problem;  // must appear in the message
};

TEST(Qwen35ConfigTest, BadInputsNameTheFileAndTheField) {
  const std::vector<BadCase> cases = {
      {"unknown model_type", [](json& j) { j["model_type"] = "qwen3_5_moe"; }, "model_type", "unsupported model_type"},
      {"missing model_type", [](json& j) { j.erase("model_type"); }, "model_type", "missing"},
      {"wrong architecture", [](json& j) { j["architectures"] = {"Qwen3ForCausalLM"}; }, "architectures",
       "unsupported architecture"},
      {"nested arch on flat type", [](json& j) { j["architectures"] = {"Qwen3_5ForConditionalGeneration"}; },
       "architectures", "expected \"Qwen3_5ForCausalLM\""},
      {"missing hidden_size", [](json& j) { j.erase("hidden_size"); }, "hidden_size", "missing"},
      {"null hidden_size", [](json& j) { j["hidden_size"] = nullptr; }, "hidden_size", "missing"},
      {"string hidden_size", [](json& j) { j["hidden_size"] = "64"; }, "hidden_size", "expected an integer"},
      {"float hidden_size", [](json& j) { j["hidden_size"] = 64.5; }, "hidden_size", "expected an integer"},
      {"negative vocab", [](json& j) { j["vocab_size"] = -1; }, "vocab_size", "must be positive"},
      {"missing linear heads", [](json& j) { j.erase("linear_num_value_heads"); }, "linear_num_value_heads",
       "missing"},
      {"layer_types length", [](json& j) { j["layer_types"] = {"linear_attention", "full_attention"}; },
       "layer_types", "has 2 entries but num_hidden_layers is 4"},
      {"layer_types value",
       [](json& j) { j["layer_types"] = {"linear_attention", "sliding_attention", "linear_attention", "full_attention"}; },
       "layer_types", "entry 1 is \"sliding_attention\""},
      {"layer_types not a list", [](json& j) { j["layer_types"] = "LLLF"; }, "layer_types", "expected a list"},
      {"bad interval", [](json& j) { j["full_attention_interval"] = 0; }, "full_attention_interval",
       "must be positive"},
      {"kv heads", [](json& j) { j["num_key_value_heads"] = 3; }, "num_key_value_heads",
       "num_attention_heads (4) is not a multiple of num_key_value_heads (3)"},
      {"gdn heads", [](json& j) { j["linear_num_value_heads"] = 3; }, "linear_num_value_heads",
       "linear_num_value_heads (3) is not a multiple of linear_num_key_heads (2)"},
      {"mrope not a list", [](json& j) { j["rope_parameters"]["mrope_section"] = 8; },
       "rope_parameters.mrope_section", "expected a list of integers"},
      {"mrope negative", [](json& j) { j["rope_parameters"]["mrope_section"] = {2, -1, 3}; },
       "rope_parameters.mrope_section", "expected non-negative integers"},
      {"odd rotary dim", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.3; },
       "partial_rotary_factor", "is not a positive even integer"},
      {"rotary factor range", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; },
       "rope_parameters.partial_rotary_factor", "must be in (0, 1]"},
      {"rope type", [](json& j) { j["rope_parameters"]["rope_type"] = "llama3"; }, "rope_parameters.rope_type",
       "unsupported rope type \"llama3\""},
      {"rope not an object", [](json& j) { j["rope_parameters"] = 5; }, "rope_parameters", "expected an object"},
      {"activation", [](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act", "unsupported activation"},
      {"attention bias", [](json& j) { j["attention_bias"] = true; }, "attention_bias", "not supported"},
      {"dtype", [](json& j) { j["dtype"] = "int8"; }, "dtype", "unsupported dtype \"int8\""},
      {"bool as int", [](json& j) { j["tie_word_embeddings"] = 1; }, "tie_word_embeddings", "expected true or false"},
      {"eos type", [](json& j) { j["eos_token_id"] = "<|im_end|>"; }, "eos_token_id", "expected a token id"},
      {"eos outside vocab", [](json& j) { j["eos_token_id"] = {5, 1000}; }, "eos_token_id",
       "token id 1000 is outside the vocabulary (1000)"},
      {"quantization not an object", [](json& j) { j["quantization_config"] = "nvfp4"; }, "quantization_config",
       "expected an object"},
      {"rms eps", [](json& j) { j["rms_norm_eps"] = 0; }, "rms_norm_eps", "must be positive"},
      {"mtp negative", [](json& j) { j["mtp_num_hidden_layers"] = -1; }, "mtp_num_hidden_layers", "negative"},
  };
  for (const BadCase& bc : cases) {
    json j = SmallFlat();
    bc.mutate(j);
    absl::StatusOr<Qwen35Config> c = Parse(j);
    ASSERT_FALSE(c.ok()) << bc.name;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bc.name;
    std::string msg(c.status().message());
    EXPECT_THAT(msg, HasSubstr("test/config.json")) << bc.name;
    EXPECT_THAT(msg, HasSubstr(bc.field)) << bc.name << ": " << msg;
    EXPECT_THAT(msg, HasSubstr(bc.problem)) << bc.name << ": " << msg;
  }
}

TEST(Qwen35ConfigTest, NestedLayoutErrorsUseTheTextConfigPath) {
  json j = json::parse(kQwen35_4B);
  j["text_config"]["num_key_value_heads"] = 5;
  absl::StatusOr<Qwen35Config> c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("text_config.num_key_value_heads"));

  j = json::parse(kQwen35_4B);
  j.erase("text_config");
  c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'text_config': required field is missing"));

  j["text_config"] = {1, 2};
  c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'text_config': expected an object"));
}

TEST(Qwen35ConfigTest, NotJsonOrNotAnObject) {
  absl::StatusOr<Qwen35Config> c = ParseQwen35Config("{\"model_type\": ", "x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("x/config.json: not valid JSON"));
  c = ParseQwen35Config("[1, 2]", "x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("expected a JSON object"));
}

TEST(GenerationConfigTest, ParsesTheQwen35File) {
  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(kQwen35Generation);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(248046, 248044));
  EXPECT_EQ(g->bos_token_id, 248044);
  EXPECT_EQ(g->pad_token_id, 248044);
  EXPECT_EQ(g->do_sample, true);
  EXPECT_DOUBLE_EQ(g->temperature.value(), 1.0);
  EXPECT_DOUBLE_EQ(g->top_p.value(), 0.95);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_FALSE(g->min_p.has_value());
  EXPECT_FALSE(g->repetition_penalty.has_value());
  EXPECT_FALSE(g->presence_penalty.has_value());
}

TEST(GenerationConfigTest, ScalarEosNullsAndEmpty) {
  absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(
      R"({"eos_token_id": 5, "temperature": null, "top_p": null, "min_p": 0.05, "presence_penalty": 1.5,
          "repetition_penalty": 1.1})");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(5));
  EXPECT_FALSE(g->temperature.has_value());
  EXPECT_FALSE(g->top_p.has_value());
  EXPECT_DOUBLE_EQ(g->min_p.value(), 0.05);
  EXPECT_DOUBLE_EQ(g->presence_penalty.value(), 1.5);
  EXPECT_DOUBLE_EQ(g->repetition_penalty.value(), 1.1);

  g = ParseGenerationConfig("{}");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->eos_token_ids.empty());
  EXPECT_FALSE(g->do_sample.has_value());
}

TEST(GenerationConfigTest, BadValues) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"temperature": "hot"})", "'temperature': expected a number"},
      {R"({"temperature": -1})", "'temperature': must not be negative"},
      {R"({"top_p": 1.5})", "'top_p': must be in (0, 1]"},
      {R"({"top_k": 2.5})", "'top_k': expected an integer"},
      {R"({"top_k": -3})", "'top_k': must not be negative"},
      {R"({"min_p": 2})", "'min_p': must be in [0, 1]"},
      {R"({"repetition_penalty": 0})", "'repetition_penalty': must be positive"},
      {R"({"do_sample": "yes"})", "'do_sample': expected true or false"},
      {R"({"eos_token_id": [1, "x"]})", "'eos_token_id': expected a token id"},
      {R"({"eos_token_id": -2})", "'eos_token_id': expected a token id"},
      {R"({"bos_token_id": -2})", "'bos_token_id': not a token id"},
      {R"(not json)", "not valid JSON"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<GenerationConfig> g = ParseGenerationConfig(text, "m/generation_config.json");
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("m/generation_config.json")) << text;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(want)) << text;
  }
}

class LoadConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("sparkserve_config_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(LoadConfigTest, WithGenerationConfig) {
  Write("config.json", kQwen35_4B);
  Write("generation_config.json", kQwen35Generation);
  absl::StatusOr<Qwen35Config> c = LoadQwen35Config(dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->generation.has_value());
  EXPECT_EQ(c->generation->top_k, 20);
  // generation_config's list first, config.json's 248044 not repeated.
  EXPECT_THAT(c->stop_token_ids(), ElementsAre(248046, 248044));
}

TEST_F(LoadConfigTest, WithoutGenerationConfig) {
  Write("config.json", kQwen35_4B);
  absl::StatusOr<Qwen35Config> c = LoadQwen35Config(dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->generation.has_value());
  EXPECT_THAT(c->stop_token_ids(), ElementsAre(248044));
}

TEST_F(LoadConfigTest, MissingConfigIsNotFoundNamingThePath) {
  absl::StatusOr<Qwen35Config> c = LoadQwen35Config(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr((dir_ / "config.json").string()));
}

TEST_F(LoadConfigTest, BadGenerationConfigIsAnErrorNotIgnored) {
  Write("config.json", kQwen35_4B);
  Write("generation_config.json", R"({"eos_token_id": [248046, 999999]})");
  absl::StatusOr<Qwen35Config> c = LoadQwen35Config(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("generation_config.json"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("999999 is outside the vocabulary"));

  Write("generation_config.json", "{");
  c = LoadQwen35Config(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("generation_config.json: not valid JSON"));
}

TEST_F(LoadConfigTest, ErrorNamesTheConfigPath) {
  json j = json::parse(kQwen35_4B);
  j["text_config"]["hidden_size"] = "big";
  Write("config.json", j.dump());
  absl::StatusOr<Qwen35Config> c = LoadQwen35Config(dir_);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr((dir_ / "config.json").string() + ": field 'text_config.hidden_size': expected an integer"));
}

}  // namespace
}  // namespace sparkserve::model
