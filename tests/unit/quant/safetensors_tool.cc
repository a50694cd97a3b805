// quant_safetensors_tool: our safetensors reader/writer driven from the Python-oracle test
// (tests/golden/test_safetensors_oracle.py).
//   write FILE                      writes the sample tensors (below) with metadata into FILE
//   write-sharded DIR MAX_BYTES     the same as shards + model.safetensors.index.json
//   dump FILE|DIR                   prints {"metadata": {...}, "tensors": {name: {dtype, shape, hex}}}
// Sample tensor k (0-based, in list order) has byte i = (7 i + 13 k + 1) mod 256.
#include <cstdio>
#include <filesystem>
#include <string>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "quant/safetensors_reader.h"
#include "quant/safetensors_writer.h"

namespace q = sparkserve::quant;
namespace core = sparkserve::core;

namespace {

q::NamedTensors Sample() {
  const std::vector<std::tuple<std::string, core::DType, core::Shape>> specs = {
      {"a.f32", core::DType::kF32, {3, 5}},     {"b.bf16", core::DType::kBF16, {4, 3}},
      {"c.u8", core::DType::kU8, {7}},          {"d.fp8", core::DType::kF8E4M3, {2, 3}},
      {"e.i64", core::DType::kI64, {2}},        {"f.f16", core::DType::kF16, {3}},
      {"g.i32", core::DType::kI32, {1, 1, 2}},  {"h.scalar", core::DType::kF32, {}},
      {"i.empty", core::DType::kF32, {0, 4}},
  };
  q::NamedTensors out;
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto& [name, dtype, shape] = specs[k];
    core::Tensor t = core::Tensor::Empty(shape, dtype);
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(7 * i + 13 * k + 1);
    out.emplace_back(name, t);
  }
  return out;
}

const std::map<std::string, std::string> kMetadata = {{"format", "pt"}, {"origin", "sparkserve"}};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc == 3) {
    const absl::Status s = q::WriteSafetensors(argv[2], Sample(), kMetadata);
    return s.ok() ? 0 : Fail(s);
  }
  if (mode == "write-sharded" && argc == 4) {
    auto s = q::WriteShardedSafetensors(argv[2], Sample(), std::stoull(argv[3]), kMetadata);
    return s.ok() ? 0 : Fail(s.status());
  }
  if (mode == "dump" && argc == 3) {
    auto ckpt = std::filesystem::is_directory(argv[2]) ? q::SafetensorsCheckpoint::Open(argv[2])
                                                        : q::SafetensorsCheckpoint::OpenFiles({argv[2]});
    if (!ckpt.ok()) return Fail(ckpt.status());
    nlohmann::json out = {{"metadata", ckpt->metadata()}, {"tensors", nlohmann::json::object()}};
    for (const std::string& name : ckpt->Names()) {
      const core::Tensor t = *ckpt->Get(name);
      std::string hex;
      for (uint8_t b : t.bytes()) hex += fmt::format("{:02x}", b);
      out["tensors"][name] = {{"dtype", std::string(core::DTypeSafetensorsName(t.dtype()))},
                              {"shape", t.shape()}, {"hex", hex}};
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: quant_safetensors_tool write FILE | write-sharded DIR MAX_BYTES | dump FILE|DIR\n");
  return 2;
}
