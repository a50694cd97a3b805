// demo-model: a random-weight Qwen3.5 checkpoint (qwen3_5_text flat layout, Qwen3_5ForCausalLM,
// tied embeddings, MTP block) written straight into a model directory in bf16 or a quantised recipe,
// tensor by tensor through the quantizer pipeline (no full model in memory). Same seed -> same bytes.
// The weights carry no language; they are scaled so the model gives finite, varied logits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/quantizer/quantize_pipeline.h"

namespace sparkserve::head {

struct DemoModelOptions {
  std::string shape = "tiny";  // "tiny" (toy size, own tokenizer) or "4b" (exact Qwen3.5-4B shapes)
  std::string recipe = "bf16"; // "bf16", "nvfp4-mixed", "nvfp4", "fp8" (quant::Recipe built-ins)
  uint64_t seed = 0;
  int threads = 0;             // <= 0: hardware concurrency
  bool progress = true;        // progress bar on stderr
  uint64_t max_shard_bytes = 4ull << 30;
};

// Shapes of the two demo sizes, as config.json fields.
struct DemoShape {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t lin_k_heads = 0, lin_v_heads = 0, lin_k_dim = 0, lin_v_dim = 0, conv_kernel = 4;
  int64_t vocab = 0;
  std::vector<int64_t> mrope_section;
};
absl::StatusOr<DemoShape> DemoShapeFor(const std::string& shape, int64_t tokenizer_tokens);

// Every tensor of the demo model (name, bf16, shape), text weights under "model.", MTP under "mtp.".
std::vector<quant::SourceTensorInfo> DemoTensors(const DemoShape& s);

// Random values of demo tensor `name` (bf16, deterministic in seed and name): zero-centred norms
// ~0.1*N(0,1); the GDN gated norm 1 + 0.1*N; A_log = log U(0.01, 4); dt_bias 1; conv1d 0.3*N;
// everything else 0.02*N (N approximated by an Irwin-Hall sum of four uniforms).
core::Tensor DemoTensorValues(const quant::SourceTensorInfo& info, uint64_t seed);

// Writes the model into `out_dir` (must not exist or be empty; appears only when complete):
// config.json, generation_config.json, safetensors (+ index), and for "tiny" tokenizer.json +
// tokenizer_config.json (demo_model_tokenizer.h).
absl::StatusOr<quant::QuantizeReport> WriteDemoModel(const std::string& out_dir, const DemoModelOptions& options);

}  // namespace sparkserve::head
