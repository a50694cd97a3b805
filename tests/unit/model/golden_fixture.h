// Test helpers: the Qwen3.5 golden fixtures (tests/golden/qwen35/<name>) and runner shortcuts.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/cpu/cpu_model_loader.h"
#include "quant/safetensors_reader.h"

namespace sparkserve::model::testing {

using cpu::CpuModelRunner;
using cpu::CpuRunnerOptions;
using cpu::LoadCpuModel;

inline std::string GoldenDir(const std::string& name) {
  return std::string(SPARKSERVE_SOURCE_DIR) + "/tests/golden/qwen35/" + name;
}

struct Golden {
  std::vector<int32_t> ids, greedy, draft_tokens;
  std::vector<float> logits, hidden, mtp_logits, draft_logits;
};

template <typename T>
std::vector<T> Read(const quant::SafetensorsFile& f, const std::string& name) {
  auto t = f.Get(name);
  EXPECT_TRUE(t.ok()) << name;
  if (!t.ok()) return {};
  std::vector<T> v(static_cast<size_t>(t->numel()));
  std::memcpy(v.data(), t->raw_data(), t->nbytes());
  return v;
}

inline Golden LoadGolden(const std::string& name) {
  auto f = quant::SafetensorsFile::Open(GoldenDir(name) + "/reference.safetensors");
  EXPECT_TRUE(f.ok()) << f.status();
  Golden g;
  g.ids = Read<int32_t>(*f, "ids");
  g.greedy = Read<int32_t>(*f, "greedy");
  g.draft_tokens = Read<int32_t>(*f, "draft_tokens");
  g.logits = Read<float>(*f, "logits");
  g.hidden = Read<float>(*f, "hidden");
  g.mtp_logits = Read<float>(*f, "mtp_logits");
  g.draft_logits = Read<float>(*f, "draft_logits");
  return g;
}

inline CpuRunnerOptions SmallOptions() {
  CpuRunnerOptions o;
  o.state.num_slots = 6;
  o.state.num_kv_pages = 48;
  o.state.kv_page_size = 4;
  o.state.max_verify_tokens = 6;
  o.max_seq_len = 64;
  return o;
}

inline std::unique_ptr<CpuModelRunner> Load(const std::string& name, CpuRunnerOptions o = SmallOptions()) {
  auto r = LoadCpuModel(GoldenDir(name), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : nullptr;
}

// Pages [first, first + count): one sequence's page table.
inline std::vector<int32_t> Pages(int32_t first, int32_t count) {
  std::vector<int32_t> p(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) p[static_cast<size_t>(i)] = first + i;
  return p;
}

inline SeqWork Seq(SlotId slot, int32_t start, std::vector<int32_t> tokens, std::vector<int32_t> pages,
                   LogitsWanted want = LogitsWanted::kAll) {
  SeqWork s;
  s.slot = slot;
  s.start_pos = start;
  s.tokens = std::move(tokens);
  s.kv_pages = std::move(pages);
  s.logits = want;
  return s;
}

// max |a - b| / max |b|
inline double RelErr(const float* a, const float* b, size_t n) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    err = std::max(err, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return err / std::max(scale, 1e-30);
}

inline double MaxAbsDiff(const float* a, const float* b, size_t n) {
  double err = 0;
  for (size_t i = 0; i < n; ++i) err = std::max(err, std::abs(double(a[i]) - b[i]));
  return err;
}

inline const char* const kConfigs[] = {"text_tied", "text_untied", "vl_tied", "vl_untied", "text_nosection",
                                         "vl_nosection"};

}  // namespace sparkserve::model::testing
