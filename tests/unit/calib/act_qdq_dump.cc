// calib_act_qdq_dump MODEL_DIR IN.safetensors OUT.safetensors: for tests/golden/check_ct_roundtrip.py
// (needs torch). Applies our simulated W4A4 / FP8-KV quantisation (model/activation_fake_quant.h)
// with the scales stored in MODEL_DIR to every f32 tensor of IN: a tensor named after a Linear module
// gets its NVFP4 input QDQ, one named "ATTN.k" / "ATTN.v" the FP8 KV QDQ; results go to OUT.
#include <cstdio>
#include <cstring>

#include "calib/activation_fake_quant.h"
#include "quant/checkpoint.h"
#include "quant/safetensors_reader.h"
#include "quant/safetensors_writer.h"

using namespace sparkserve;  // NOLINT

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL_DIR IN.safetensors OUT.safetensors\n", argv[0]);
    return 2;
  }
  auto ckpt = quant::Checkpoint::Open(argv[1]);
  auto in = quant::SafetensorsFile::Open(argv[2]);
  if (!ckpt.ok() || !in.ok()) {
    std::fprintf(stderr, "cannot open the model or the input\n");
    return 1;
  }
  auto sim = calib::QuantizedActivationSimulator::FromCheckpoint(*ckpt);
  if (!sim.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sim.status().message()).c_str());
    return 1;
  }
  quant::NamedTensors out;
  for (const auto& e : in->header().tensors) {
    core::Tensor x = in->View(e).Clone();
    if (x.dtype() != core::DType::kF32 || x.shape().size() != 2) {
      std::fprintf(stderr, "%s: expected f32 [rows, in]\n", e.name.c_str());
      return 1;
    }
    const int64_t rows = x.shape()[0], cols = x.shape()[1];
    core::Tensor y = core::Tensor::Empty(x.shape(), core::DType::kF32);
    const bool kv = e.name.size() > 2 && (e.name.ends_with(".k") || e.name.ends_with(".v"));
    if (kv) {
      core::Tensor other = x.Clone();  // OnKvWrite changes k and v together: pass a scratch partner
      float* k = e.name.ends_with(".k") ? x.data<float>() : other.data<float>();
      float* v = e.name.ends_with(".k") ? other.data<float>() : x.data<float>();
      (*sim)->OnKvWrite(e.name.substr(0, e.name.size() - 2), k, v, rows * cols);
      std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    } else {
      const float* q = (*sim)->OnLinearInput(e.name, x.data<float>(), rows, cols);
      std::memcpy(y.raw_data(), q, x.nbytes());
    }
    out.emplace_back(e.name, std::move(y));
  }
  auto st = quant::WriteSafetensors(argv[3], out);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
