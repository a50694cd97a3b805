// quantize_dequant_dump MODEL_DIR OUT_DIR: our reader's view of a checkpoint for the
// compressed-tensors cross-check (tests/golden/check_ct_roundtrip.py): OUT_DIR/dequant.safetensors
// holds "<module>.weight" as f32 (QuantizedLinear::DequantizeToF32) and OUT_DIR/formats.json maps
// each module to its FormatName().
#include <cstdio>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "quant/checkpoint.h"
#include "quant/safetensors_writer.h"

int main(int argc, char** argv) {
  using namespace sparkserve;
  if (argc != 3) {
    std::fprintf(stderr, "usage: quantize_dequant_dump MODEL_DIR OUT_DIR\n");
    return 2;
  }
  auto ckpt = quant::Checkpoint::Open(argv[1]);
  if (!ckpt.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ckpt.status().message()).c_str());
    return 1;
  }
  quant::NamedTensors out;
  nlohmann::ordered_json formats = nlohmann::ordered_json::object();
  for (const auto& [name, m] : ckpt->modules()) {
    auto w = m.DequantizeToF32();
    if (!w.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(w.status().message()).c_str());
      return 1;
    }
    out.emplace_back(name + ".weight", *w);
    formats[name] = std::string(m.FormatName());
  }
  const std::string dir = argv[2];
  auto st = quant::WriteSafetensors(dir + "/dequant.safetensors", out);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::ofstream(dir + "/formats.json") << formats.dump(2) << "\n";
  return 0;
}
