// CPU forward of Qwen3.5 decoder layers over a ragged batch (one rank's shard): every linear runs
// once over all the step's tokens; only the GDN recurrence, the conv window and attention are
// per sequence. Outputs of o_proj/out_proj/down_proj are partial sums, all-reduced here.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/ops.h"
#include "model/activation_observer.h"
#include "core/collective.h"
#include "model/config.h"
#include "model/qwen35_state.h"
#include "model/qwen35_weights.h"

namespace sparkserve::model::cpu {

// The step's token layout as the layers see it.
struct BatchView {
  int64_t num_tokens = 0;
  std::vector<kernels::cpu::RaggedSeq> seqs;
  std::vector<int32_t> positions;                      // [num_tokens]
  std::vector<std::span<const int32_t>> pages;         // per seq: KV page table
  std::vector<int32_t> slots;                          // per seq: state slot
  std::vector<uint8_t> keep_columns;                   // per seq: record per-column GDN/conv state
};

struct LayerContext {
  const Qwen35Config& config;
  const RankShapes& shapes;
  Qwen35State& state;
  core::Collective& collective;
  const BatchView& batch;
  // Calibration hook (null: none) and the layer's checkpoint prefix ("model.layers.3.",
  // "mtp.layers.0."), used only to name observed modules.
  ActivationObserver* observer = nullptr;
  std::string_view layer_prefix;
  // Cross-backend comparisons: store K/V rounded to bf16 and round every linear's input rows to
  // f16, as the CUDA backend does.
  bool kv_bf16 = false;
  bool linear_inputs_f16 = false;
};

// One decoder layer: residual [T, d] updated in place. `kv` is the layer's KV pool (attention
// layers), `gdn_index` its GDN state index (linear-attention layers).
absl::Status DecoderLayerForward(const LayerContext& ctx, const LayerWeights& w,
                                 const kernels::cpu::KvPool* kv, int32_t gdn_index, float* residual);

}  // namespace sparkserve::model::cpu
