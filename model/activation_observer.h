// ActivationObserver: an optional hook the CPU model runner calls with every Linear module's input
// rows and every attention layer's K/V as written to the cache: calibration statistics, and (for
// evaluation) a substitute input / in-place K/V change to simulate activation quantisation; and
// AbsMaxObserver, which keeps their running absolute maxima. Unset (the default) costs one null
// check per Linear call. With tensor parallelism an observer sees this rank's slice only.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace sparkserve::model {

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // x [rows, in]: the input of Linear module `module` (checkpoint name without ".weight", e.g.
  // "model.layers.3.mlp.down_proj", "mtp.fc", "lm_head"). Returns what the Linear reads: `x`, or
  // a [rows, in] buffer of the observer's that stays valid until its next call for `module`.
  virtual const float* OnLinearInput(const std::string& module, const float* x, int64_t rows, int64_t in) = 0;
  // k, v [count] (rows of kv_heads * head_dim, k after k_norm and RoPE) about to be written to the
  // KV cache of attention module `attention` (e.g. "model.layers.3.self_attn",
  // "mtp.layers.0.self_attn"); the observer may change them in place.
  virtual void OnKvWrite(const std::string& attention, float* k, float* v, int64_t count) = 0;
};

// Running max |x| per Linear input and per attention K and V. Thread-safe.
class AbsMaxObserver final : public ActivationObserver {
 public:
  const float* OnLinearInput(const std::string& module, const float* x, int64_t rows, int64_t in) override;
  void OnKvWrite(const std::string& attention, float* k, float* v, int64_t count) override;

  // module -> max |input| so far.
  std::map<std::string, float> input_amax() const;
  // attention module -> {max |k|, max |v|} so far.
  std::map<std::string, std::pair<float, float>> kv_amax() const;
  // Rows seen per Linear module (tests: each token is observed once per module).
  std::map<std::string, int64_t> input_rows() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, float> input_amax_;
  std::map<std::string, int64_t> input_rows_;
  std::map<std::string, std::pair<float, float>> kv_amax_;
};

// max |x[i]| over count values (NaN is ignored; 0 for none).
float AbsMax(const float* x, int64_t count);

}  // namespace sparkserve::model
