// `sparkserve inspect` on a small Qwen3.5-shaped checkpoint written with our safetensors writer
// (NVFP4, FP8 per channel and per block, dense, tied embeddings, MTP): every module's format, shape
// and bytes, totals, and the decode bytes; and bad model directories failing cleanly.
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/safetensors_writer.h"
#include "tests/unit/quant/test_dir.h"

namespace sparkserve::quant {
namespace {

using core::DType;
using core::Tensor;
using ::testing::HasSubstr;

struct CommandResult {
  int rc;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CommandResult Inspect(const TestDir& tmp, const std::string& dir, bool json) {
  const std::string bin = std::string(SPARKSERVE_BINARY_DIR) + "/bin/sparkserve";
  const std::string out = tmp.path("stdout.txt"), err = tmp.path("stderr.txt");
  const std::string cmd = fmt::format("'{}' inspect '{}' {} >'{}' 2>'{}'", bin, dir, json ? "--json" : "", out, err);
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
}

Tensor Bytes(core::Shape shape, DType dtype, uint8_t fill = 0x11) {
  Tensor t = Tensor::Empty(std::move(shape), dtype);
  std::memset(t.raw_data(), fill, t.nbytes());
  return t;
}
Tensor One(float v) { return Tensor::FromF32({1}, std::vector<float>{v}); }

constexpr char kConfig[] = R"({
  "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
  "hidden_size": 32, "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 40,
  "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
  "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
  "linear_conv_kernel_dim": 4, "layer_types": ["linear_attention", "full_attention"],
  "tie_word_embeddings": true, "mtp_num_hidden_layers": 1, "rms_norm_eps": 1e-6,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]},
  "quantization_config": {
    "quant_method": "compressed-tensors", "format": "mixed-precision",
    "config_groups": {
      "nvfp4": {"targets": ["re:.*mlp\\.(gate|up)_proj"], "format": "nvfp4-pack-quantized",
                "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}},
      "fp8_channel": {"targets": ["re:.*self_attn\\.[qkvo]_proj"],
                      "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                      "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}},
      "fp8_block": {"targets": ["re:.*down_proj"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": true}},
      "fallback": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "group_size": 16}}
    },
    "ignore": ["lm_head", "re:.*linear_attn.*", "re:mtp.*"]
  }
})";

struct Expect {
  std::string format;
  int64_t out, in;
  uint64_t bytes;
};

// The test checkpoint: tensors plus, for each module, what inspect must report.
struct Model {
  NamedTensors tensors;
  std::map<std::string, Expect> modules;
  uint64_t layer_other = 0;  // norms, conv1d, A_log, dt_bias inside the text model
  uint64_t mtp = 0;

  void Nvfp4(const std::string& m, int64_t out, int64_t in) {
    tensors.push_back({m + ".weight_packed", Bytes({out, in / 2}, DType::kU8)});
    tensors.push_back({m + ".weight_scale", Bytes({out, in / 16}, DType::kF8E4M3, 0x38)});
    tensors.push_back({m + ".weight_global_scale", One(448.0f)});
    modules[m] = {"nvfp4", out, in, static_cast<uint64_t>(out * in / 2 + out * in / 16 + 4)};
  }
  void Fp8Channel(const std::string& m, int64_t out, int64_t in) {
    tensors.push_back({m + ".weight", Bytes({out, in}, DType::kF8E4M3, 0x38)});
    tensors.push_back({m + ".weight_scale", Bytes({out, 1}, DType::kBF16, 0x3f)});
    modules[m] = {"fp8", out, in, static_cast<uint64_t>(out * in + out * 2)};
  }
  void Fp8Block(const std::string& m, int64_t out, int64_t in) {
    tensors.push_back({m + ".weight", Bytes({out, in}, DType::kF8E4M3, 0x38)});
    tensors.push_back({m + ".weight_scale", Tensor::FromF32({1, 1}, std::vector<float>{0.5f})});
    modules[m] = {"fp8", out, in, static_cast<uint64_t>(out * in + 4)};
  }
  void Dense(const std::string& m, int64_t out, int64_t in, DType dtype = DType::kBF16) {
    tensors.push_back({m + ".weight", Bytes({out, in}, dtype, 0)});
    modules[m] = {std::string(core::DTypeName(dtype)), out, in, static_cast<uint64_t>(out * in) * core::DTypeSize(dtype)};
  }
  void Other(const std::string& name, core::Shape shape, DType dtype = DType::kBF16) {
    Tensor t = Bytes(shape, dtype, 0);
    (name.rfind("mtp.", 0) == 0 ? mtp : layer_other) += t.nbytes();
    tensors.push_back({name, t});
  }
};

Model BuildModel() {
  Model m;
  m.Dense("model.embed_tokens", 40, 32);
  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    m.Other(p + "input_layernorm.weight", {32});
    m.Other(p + "post_attention_layernorm.weight", {32});
    if (l == 0) {
      m.Dense(p + "linear_attn.in_proj_qkv", 32, 32);
      m.Dense(p + "linear_attn.in_proj_z", 16, 32);
      m.Dense(p + "linear_attn.in_proj_a", 2, 32);
      m.Dense(p + "linear_attn.in_proj_b", 2, 32);
      m.Dense(p + "linear_attn.out_proj", 32, 16);
      m.Other(p + "linear_attn.conv1d.weight", {32, 1, 4});
      m.Other(p + "linear_attn.A_log", {2}, DType::kF32);
      m.Other(p + "linear_attn.dt_bias", {2});
      m.Other(p + "linear_attn.norm.weight", {8}, DType::kF32);
    } else {
      m.Fp8Channel(p + "self_attn.q_proj", 64, 32);
      m.Fp8Channel(p + "self_attn.k_proj", 16, 32);
      m.Fp8Channel(p + "self_attn.v_proj", 16, 32);
      m.Fp8Channel(p + "self_attn.o_proj", 32, 32);
      m.Other(p + "self_attn.q_norm.weight", {16});
      m.Other(p + "self_attn.k_norm.weight", {16});
    }
    m.Nvfp4(p + "mlp.gate_proj", 64, 32);
    m.Nvfp4(p + "mlp.up_proj", 64, 32);
    m.Fp8Block(p + "mlp.down_proj", 32, 64);
  }
  m.Other("model.norm.weight", {32});
  m.Dense("mtp.fc", 32, 64);
  m.Dense("mtp.layers.0.mlp.down_proj", 32, 64);
  m.mtp += m.modules["mtp.fc"].bytes + m.modules["mtp.layers.0.mlp.down_proj"].bytes;
  m.Other("mtp.norm.weight", {32});
  return m;
}

void WriteModel(const std::string& dir, const std::string& config, const NamedTensors& tensors) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config;
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
}

TEST(Inspect, JsonReportsEveryModuleTotalsAndDecodeBytes) {
  TestDir tmp;
  const Model m = BuildModel();
  WriteModel(tmp.path("model"), kConfig, m.tensors);
  const CommandResult r = Inspect(tmp, tmp.path("model"), true);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["num_layers"], 2);
  EXPECT_EQ(j["layer_types"], nlohmann::json({"linear_attention", "full_attention"}));
  EXPECT_EQ(j["architecture"], "Qwen3_5ForCausalLM");

  std::map<std::string, Expect> got;
  for (const auto& e : j["modules"]) {
    got[e["name"]] = {e["format"], e["shape"][0], e["shape"][1], e["bytes"]};
  }
  ASSERT_EQ(got.size(), m.modules.size());
  std::map<std::string, std::pair<int64_t, uint64_t>> totals;
  uint64_t layers = 0;
  for (const auto& [name, want] : m.modules) {
    ASSERT_TRUE(got.count(name)) << name;
    const Expect& g = got[name];
    EXPECT_EQ(g.format, want.format) << name;
    EXPECT_EQ(g.out, want.out) << name;
    EXPECT_EQ(g.in, want.in) << name;
    EXPECT_EQ(g.bytes, want.bytes) << name;
    totals[want.format].first++;
    totals[want.format].second += want.bytes;
    if (name.rfind("model.layers.", 0) == 0) layers += want.bytes;
  }
  EXPECT_EQ(j["modules"][0]["name"], "model.embed_tokens");
  EXPECT_EQ(j["modules"].back()["name"], "mtp.layers.0.mlp.down_proj");
  for (const auto& [fmt_name, t] : totals) {
    EXPECT_EQ(j["totals"][fmt_name]["modules"], t.first) << fmt_name;
    EXPECT_EQ(j["totals"][fmt_name]["bytes"], t.second) << fmt_name;
  }
  // Tied: the embedding table is read once, as the lm_head; MTP weights are not in the decode step.
  const uint64_t embed = m.modules.at("model.embed_tokens").bytes;
  EXPECT_EQ(j["decode_bytes_per_token"].get<uint64_t>(), layers + m.layer_other + embed);
  EXPECT_EQ(j["decode_breakdown"]["lm_head"].get<uint64_t>(), embed);
  EXPECT_EQ(j["decode_breakdown"]["embedding_row"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["mtp"]["bytes"].get<uint64_t>(), m.mtp);
  EXPECT_EQ(j["mtp"]["bytes_per_draft_token"].get<uint64_t>(), m.mtp + embed + embed / 40);
  EXPECT_FALSE(j.contains("unclassified_bytes"));
  EXPECT_EQ(r.err, "");
}

TEST(Inspect, UntiedLmHeadIsReadFullyPlusOneEmbeddingRow) {
  TestDir tmp;
  Model m = BuildModel();
  m.Dense("lm_head", 40, 32, DType::kF32);
  nlohmann::json config = nlohmann::json::parse(kConfig);
  config["tie_word_embeddings"] = false;
  WriteModel(tmp.path("model"), config.dump(), m.tensors);
  const CommandResult r = Inspect(tmp, tmp.path("model"), true);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["decode_breakdown"]["lm_head"].get<uint64_t>(), 40u * 32 * 4);
  EXPECT_EQ(j["decode_breakdown"]["embedding_row"].get<uint64_t>(), 32u * 2);
  EXPECT_EQ(j["totals"]["f32"]["modules"], 1);
}

TEST(Inspect, TextOutputNamesFormatsAndTotals) {
  TestDir tmp;
  const Model m = BuildModel();
  WriteModel(tmp.path("model"), kConfig, m.tensors);
  const CommandResult r = Inspect(tmp, tmp.path("model"), false);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Qwen3_5ForCausalLM"));
  EXPECT_THAT(r.out, HasSubstr("pattern LF,"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("model\\.layers\\.1\\.mlp\\.gate_proj +nvfp4 +\\[64, 32\\]"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("model\\.layers\\.1\\.self_attn\\.q_proj +fp8 +\\[64, 32\\]"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("model\\.embed_tokens +bf16 +\\[40, 32\\]"));
  EXPECT_THAT(r.out, HasSubstr("totals per format"));
  EXPECT_THAT(r.out, HasSubstr("decode bytes per token"));
}

void ExpectFailure(const TestDir& tmp, const std::string& dir, const std::string& fragment) {
  const CommandResult r = Inspect(tmp, dir, true);
  EXPECT_NE(r.rc, 0) << dir;
  EXPECT_EQ(r.out, "") << "nothing on stdout for " << dir;
  EXPECT_THAT(r.err, AllOf(HasSubstr("sparkserve inspect: "), HasSubstr(fragment)));
}

TEST(Inspect, BadModelDirectoriesFailWithAClearMessage) {
  TestDir tmp;
  ExpectFailure(tmp, tmp.path("nowhere"), "config.json");
  std::filesystem::create_directories(tmp.path("empty"));
  ExpectFailure(tmp, tmp.path("empty"), "config.json");

  const Model m = BuildModel();
  nlohmann::json llama = nlohmann::json::parse(kConfig);
  llama["model_type"] = "llama";
  llama["architectures"] = {"LlamaForCausalLM"};
  WriteModel(tmp.path("llama"), llama.dump(), m.tensors);
  ExpectFailure(tmp, tmp.path("llama"), "llama");

  WriteModel(tmp.path("no_weights"), kConfig, {});
  std::filesystem::remove(tmp.path("no_weights/model.safetensors"));
  ExpectFailure(tmp, tmp.path("no_weights"), "no model.safetensors");

  WriteModel(tmp.path("truncated"), kConfig, m.tensors);
  const std::string st = tmp.path("truncated/model.safetensors");
  std::filesystem::resize_file(st, std::filesystem::file_size(st) - 5);
  ExpectFailure(tmp, tmp.path("truncated"), "model.safetensors");

  nlohmann::json int4 = nlohmann::json::parse(kConfig);
  int4["quantization_config"]["config_groups"]["fallback"]["weights"] = {{"num_bits", 4}, {"type", "int"}, {"group_size", 128}};
  WriteModel(tmp.path("int4"), int4.dump(), m.tensors);
  ExpectFailure(tmp, tmp.path("int4"), "pack-quantized");

  Model odd = BuildModel();  // an NVFP4 module whose scale does not fit its weight
  for (auto& [name, t] : odd.tensors) {
    if (name == "model.layers.1.mlp.up_proj.weight_scale") t = Bytes({64, 3}, DType::kF8E4M3, 0x38);
  }
  WriteModel(tmp.path("bad_scale"), kConfig, odd.tensors);
  ExpectFailure(tmp, tmp.path("bad_scale"), "model.layers.1.mlp.up_proj");
}

}  // namespace
}  // namespace sparkserve::quant
