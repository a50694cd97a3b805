// quantization_config parsing and target matching, with expectations taken from the
// compressed-tensors source (utils/match.py, quantization/lifecycle/apply.py, compressors/format.py).
#include "quant/compressed_tensors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sparkserve::quant {
namespace {

using ::testing::HasSubstr;

constexpr char kNvfp4Weights[] =
    R"({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true, "dynamic": false})";
constexpr char kFp8Channel[] = R"({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true})";

std::string Config(const std::string& groups, const std::string& ignore = "[]", const std::string& extra = "") {
  return R"({"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": {)" + groups +
         R"(}, "ignore": )" + ignore + extra + "}";
}

QuantizationConfig MustParse(const std::string& text) {
  auto c = ParseQuantizationConfig(text, "test/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : QuantizationConfig{};
}

std::string GroupOf(const QuantizationConfig& c, std::string_view name, std::string_view cls = "Linear") {
  const QuantScheme* s = c.SchemeFor(name, cls);
  return s ? s->name : "(none)";
}

TEST(QuantizationConfig, ParsesGroupsArgsIgnoreAndKvCache) {
  const auto c = MustParse(Config(
      std::string(R"("group_0": {"targets": ["Linear"], "weights": )") + kNvfp4Weights +
          R"(, "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}, "format": "nvfp4-pack-quantized"},)"
          R"("group_1": {"targets": ["re:.*down_proj"], "weights": {"num_bits": 8, "type": "float", "block_structure": [128, 64], "strategy": "block", "scale_dtype": "torch.bfloat16"}})",
      R"(["lm_head", "re:.*linear_attn.*"])",
      R"(, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false}, "quantization_status": "compressed")"));
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.quant_method, "compressed-tensors");
  EXPECT_EQ(c.format, "mixed-precision");
  EXPECT_EQ(c.quantization_status, "compressed");
  EXPECT_EQ(c.groups[0].name, "group_0");
  EXPECT_EQ(c.groups[0].format, "nvfp4-pack-quantized");
  ASSERT_TRUE(c.groups[0].weights && c.groups[0].input_activations);
  EXPECT_TRUE(c.groups[0].weights->is_float(4));
  EXPECT_EQ(c.groups[0].input_activations->dynamic, "local");
  EXPECT_EQ(c.groups[1].weights->block_structure, (std::vector<int>{128, 64}));
  EXPECT_EQ(c.groups[1].weights->scale_dtype, "bfloat16");
  EXPECT_EQ(c.ignore, (std::vector<std::string>{"lm_head", "re:.*linear_attn.*"}));
  ASSERT_TRUE(c.kv_cache_scheme.has_value());
  EXPECT_EQ(c.kv_cache_scheme->strategy, "tensor");
}

TEST(QuantizationConfig, InfersStrategyLikeTheLibrary) {
  const auto c = MustParse(Config(R"("a": {"targets": ["x"], "weights": {"num_bits": 8, "type": "int"}},)"
                                  R"("b": {"targets": ["y"], "weights": {"num_bits": 4, "group_size": 128}},)"
                                  R"("c": {"targets": ["z"], "weights": {"num_bits": 8, "group_size": -1}})"));
  EXPECT_EQ(c.groups[0].weights->strategy, "tensor");
  EXPECT_EQ(c.groups[1].weights->strategy, "group");
  EXPECT_EQ(c.groups[2].weights->strategy, "channel");
}

TEST(SchemeFor, ExactNamesBeatRegexesBeatClassNames) {
  const auto c = MustParse(Config(std::string(R"("cls": {"targets": ["Linear"], "weights": )") + kNvfp4Weights + "}," +
                                  R"("rx": {"targets": ["re:.*mlp.*"], "weights": )" + kFp8Channel + "}," +
                                  R"("exact": {"targets": ["model.layers.0.mlp.down_proj"], "weights": )" + kFp8Channel + "}"));
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.down_proj"), "exact");
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.up_proj"), "rx");
  EXPECT_EQ(GroupOf(c, "model.layers.0.self_attn.q_proj"), "cls");
  EXPECT_EQ(GroupOf(c, "model.embed_tokens", "Embedding"), "(none)") << "\"Linear\" does not match an Embedding";
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.down_proj", "Embedding"), "exact") << "names match whatever the class";
}

TEST(SchemeFor, RegexesUsePythonReMatchSemantics) {
  const auto c = MustParse(Config(std::string(R"("start": {"targets": ["re:model\\.layers\\.1"], "weights": )") +
                                  kFp8Channel + "}," + R"("mid": {"targets": ["re:layers\\.2"], "weights": )" +
                                  kFp8Channel + "}"));
  // re.match anchors at the start only: a prefix match is enough, a match further in is not.
  EXPECT_EQ(GroupOf(c, "model.layers.1.mlp.down_proj"), "start");
  EXPECT_EQ(GroupOf(c, "model.layers.10.mlp.down_proj"), "start");
  EXPECT_EQ(GroupOf(c, "model.layers.2.mlp.down_proj"), "(none)");
  EXPECT_EQ(GroupOf(c, "layers.2"), "mid");
}

TEST(SchemeFor, AmongRegexesTheSmallerStringWins) {
  // match_targets sorts targets by ("re:" in t, t): "re:.*down_proj" < "re:.*proj".
  const auto c = MustParse(Config(std::string(R"("broad": {"targets": ["re:.*proj"], "weights": )") + kFp8Channel +
                                  "}," + R"("narrow": {"targets": ["re:.*down_proj"], "weights": )" + kNvfp4Weights + "}"));
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.down_proj"), "narrow");
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.up_proj"), "broad");
}

TEST(SchemeFor, ATargetListedTwiceBelongsToTheLaterGroup) {
  const auto c = MustParse(Config(std::string(R"("first": {"targets": ["Linear"], "weights": )") + kFp8Channel +
                                  "}," + R"("second": {"targets": ["Linear"], "weights": )" + kNvfp4Weights + "}"));
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.up_proj"), "second");
}

TEST(SchemeFor, IgnoreByNameRegexAndClass) {
  const std::string groups = std::string(R"("g": {"targets": ["Linear", "model.embed_tokens"], "weights": )") +
                             kFp8Channel + "}";
  const auto c = MustParse(Config(groups, R"(["lm_head", "re:.*linear_attn.*", "re:mtp\\."])"));
  EXPECT_EQ(GroupOf(c, "lm_head"), "(none)");
  EXPECT_EQ(GroupOf(c, "model.layers.0.linear_attn.in_proj_qkv"), "(none)");
  EXPECT_EQ(GroupOf(c, "mtp.layers.0.mlp.down_proj"), "(none)");
  EXPECT_EQ(GroupOf(c, "model.layers.0.mlp.down_proj"), "g");
  EXPECT_EQ(GroupOf(c, "model.embed_tokens", "Embedding"), "g");
  EXPECT_EQ(GroupOf(c, "model.lm_head"), "g") << "exact ignore names do not match other modules";
  const auto by_class = MustParse(Config(groups, R"(["Embedding"])"));
  EXPECT_EQ(GroupOf(by_class, "model.embed_tokens", "Embedding"), "(none)");
  EXPECT_EQ(GroupOf(by_class, "model.layers.0.mlp.down_proj"), "g");
}

TEST(FormatFor, GroupFormatBeatsGlobalWhichBeatsInference) {
  auto c = MustParse(R"({"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": {)"
                     R"("own": {"targets": ["a"], "format": "nvfp4-pack-quantized", "weights": {"num_bits": 8, "type": "float"}},)"
                     R"("global": {"targets": ["b"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}}})");
  EXPECT_EQ(c.FormatFor(c.groups[0]), "nvfp4-pack-quantized");
  EXPECT_EQ(c.FormatFor(c.groups[1]), "float-quantized");
  c.format = "mixed-precision";
  EXPECT_EQ(c.FormatFor(c.groups[1]), "nvfp4-pack-quantized") << "inferred";
}

TEST(FormatFor, InferenceFollowsTheLibrarysPriorityList) {
  const auto c = MustParse(Config(
      R"("nvfp4": {"targets": ["a"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}},)"
      R"("mxfp4": {"targets": ["b"], "weights": {"num_bits": 4, "type": "float", "group_size": 32}},)"
      R"("w8a8fp8": {"targets": ["c"], "weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float", "dynamic": true, "strategy": "token"}},)"
      R"("fp8_weight_only": {"targets": ["d"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}},)"
      R"("w8a8int": {"targets": ["e"], "weights": {"num_bits": 8, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int", "dynamic": true, "strategy": "token"}},)"
      R"("w4a16int": {"targets": ["f"], "weights": {"num_bits": 4, "type": "int", "group_size": 128}},)"
      R"("none": {"targets": ["g"]})"));
  const std::vector<std::string> want = {"nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized",
                                         "naive-quantized",      "int-quantized",        "pack-quantized",
                                         "dense"};
  ASSERT_EQ(c.groups.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(c.FormatFor(c.groups[i]), want[i]) << c.groups[i].name;
}

std::string ParseError(const std::string& text) {
  auto c = ParseQuantizationConfig(text, "test/config.json");
  EXPECT_FALSE(c.ok());
  const std::string m(c.status().message());
  EXPECT_THAT(m, HasSubstr("test/config.json"));
  return m;
}

TEST(QuantizationConfig, RejectsWhatTheLibraryRejects) {
  EXPECT_THAT(ParseError(R"({"quant_method": "gptq"})"), HasSubstr("unsupported quantization method 'gptq'"));
  EXPECT_THAT(ParseError(R"({"config_groups": {}})"), HasSubstr("unsupported quantization method ''"));
  EXPECT_THAT(ParseError("{not json"), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["re:(unclosed"], "weights": {"num_bits": 8}})")),
              AllOf(HasSubstr("invalid regex"), HasSubstr("config_groups.g")));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"]})", R"(["re:[z-a]"])")), HasSubstr("invalid regex"));
  EXPECT_THAT(ParseError(Config(R"("NVFP4": ["Linear"])")), HasSubstr("preset scheme references"));
  EXPECT_THAT(ParseError(Config(R"("g": {"weights": {"num_bits": 8}})")), HasSubstr("missing \"targets\""));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"strategy": "diagonal"}})")),
              HasSubstr("unknown strategy 'diagonal'"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"strategy": "group"}})")),
              HasSubstr("needs a positive group_size"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"strategy": "channel", "group_size": 16}})")),
              HasSubstr("group_size needs strategy"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"strategy": "block"}})")),
              HasSubstr("block strategy and block_structure"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"strategy": "block", "block_structure": [128]}})")),
              HasSubstr("two positive integers"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "weights": {"num_bits": "eight"}})")),
              HasSubstr("config_groups.g.weights"));
  EXPECT_THAT(ParseError(Config(R"("g": {"targets": ["a"], "format": "mixed-precision"})")),
              HasSubstr("mixed-precision cannot be a group's format"));
}

}  // namespace
}  // namespace sparkserve::quant
