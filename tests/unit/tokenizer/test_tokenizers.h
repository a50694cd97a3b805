// Test helpers: a small synthetic byte-level BPE tokenizer.json, and the real Qwen3 fixture.
#pragma once
#include <string>
#include <vector>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text::testing {

// A byte-level BPE over all 256 bytes (ids 0..255 in byte order) plus `merges` ("a b", in raw
// ASCII) whose results get ids 256, 257, ... in order.
inline nlohmann::json SmallTokenizerJson(const std::vector<std::pair<std::string, std::string>>& merges) {
  const ByteLevelAlphabet& abc = ByteLevelAlphabet::Get();
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[abc.FromBytes(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json m = nlohmann::json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    m.push_back(abc.FromBytes(a) + " " + abc.FromBytes(b));
    if (!vocab.contains(abc.FromBytes(a + b))) vocab[abc.FromBytes(a + b)] = next++;
  }
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}},
  };
}

inline std::string FixturePath() {
  return std::string(SPARKSERVE_SOURCE_DIR) + "/../shared/fixtures/qwen3-tokenizer/tokenizer.json";
}

// The Qwen3 fixture, loaded once per test binary.
inline const Tokenizer& Qwen3() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::Load(FixturePath());
    if (!t.ok()) throw std::runtime_error(std::string(t.status().message()));
    return t->release();
  }();
  return *tok;
}

}  // namespace sparkserve::text::testing
