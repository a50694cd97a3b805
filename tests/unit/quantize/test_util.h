// Shared helpers for the quantizer tests: temporary directories, file bytes, a WeightSource that
// dequantises a compressed-tensors checkpoint through quant::Checkpoint, and a one-sequence forward.
#pragma once
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "core/status.h"
#include "model/config.h"
#include "model/cpu/cpu_model_runner.h"
#include "model/shard_plan.h"
#include "model/weight_source.h"
#include "quant/checkpoint.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::quant::testing {

using test_support::TempDir;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Parameters by checkpoint name, dequantised from a (possibly compressed-tensors) checkpoint.
class DequantSource : public model::WeightSource {
 public:
  explicit DequantSource(const Checkpoint* ckpt) : ckpt_(ckpt) {}
  bool Has(const std::string& name) const override {
    return Module(name) != nullptr || ckpt_->files().Contains(name);
  }
  absl::StatusOr<core::Tensor> LoadF32(const std::string& name) const override {
    if (const QuantizedLinear* m = Module(name)) return m->DequantizeToF32();
    return ckpt_->DenseF32(name);
  }

 private:
  const QuantizedLinear* Module(const std::string& name) const {
    if (name.size() < 7 || name.substr(name.size() - 7) != ".weight") return nullptr;
    return ckpt_->FindModule(name.substr(0, name.size() - 7));
  }
  const Checkpoint* ckpt_;
};

// Logits [T, vocab] of a full prefill of `ids` on the CPU runner built from `dir` (dequantised).
inline absl::StatusOr<std::vector<float>> PrefillLogits(const std::string& dir, const std::vector<int32_t>& ids) {
  ASSIGN_OR_RETURN(model::Qwen35Config config, model::LoadQwen35Config(dir));
  ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(dir));
  DequantSource source(&ckpt);
  ASSIGN_OR_RETURN(model::ShardPlan plan, model::ShardPlan::Make(0, 1, config));
  ASSIGN_OR_RETURN(model::Qwen35Weights weights, model::Qwen35Weights::Load(config, source, plan));
  model::cpu::CpuRunnerOptions opts;
  ASSIGN_OR_RETURN(auto runner, model::cpu::CpuModelRunner::Create(config, std::move(weights), plan, nullptr, opts));
  model::StepPlan step;
  model::SeqWork seq;
  seq.slot = 0;
  seq.tokens = ids;
  seq.logits = model::LogitsWanted::kAll;
  const int32_t page = opts.state.kv_page_size;
  for (int32_t p = 0; p * page < static_cast<int32_t>(ids.size()); ++p) seq.kv_pages.push_back(p);
  step.seqs.push_back(seq);
  ASSIGN_OR_RETURN(model::StepOutput out, runner->Run(step));
  auto span = out.logits.span<float>();
  return std::vector<float>(span.begin(), span.end());
}

}  // namespace sparkserve::quant::testing
