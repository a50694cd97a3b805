// Calibration text for `sparkserve quantize`: a small built-in mixed corpus (prose in several
// languages, code, a chat), or a user file (plain text: one sample per blank-line-separated
// paragraph; JSONL: one {"messages": [...]} chat per line), turned into token id samples with the
// model's tokenizer and chat template; random ids (with a warning) when the model has no tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sparkserve::calib {

// One calibration sample before tokenisation: plain text, or a chat (messages JSON array).
struct CalibrationText {
  std::string text;                   // when `messages` is null
  nlohmann::ordered_json messages;    // array of {"role", "content"} (null for plain text)
  bool is_chat() const { return !messages.is_null(); }
};

// The built-in corpus: English, German, French, Spanish, Chinese, Japanese and Russian prose,
// Python, C++ and JSON snippets, a math paragraph, and two chats.
std::vector<CalibrationText> BuiltInCalibrationTexts();

// Reads `path`: JSONL when its first non-blank line starts with '{' (every non-blank line must be a
// JSON object with a non-empty "messages" array; errors name the line), otherwise plain text split
// at blank lines. Fails on an unreadable or empty file.
absl::StatusOr<std::vector<CalibrationText>> LoadCalibrationFile(const std::string& path);

struct TokenizeOptions {
  int32_t max_tokens = 512;     // per sample: longer samples are cut
  int32_t random_tokens = 128;  // length of each random sample when there is no tokenizer
  int64_t vocab_size = 0;       // random ids are drawn from [0, vocab_size)
  uint64_t seed = 0;            // random ids
};

struct TokenizedSamples {
  std::vector<std::vector<int32_t>> samples;  // one per input text (empty texts dropped)
  std::vector<std::string> warnings;          // e.g. no tokenizer: random ids
  bool random_ids = false;
};

// Tokenises `texts` with the tokenizer of `model_dir` (tokenizer.json; add_special_tokens=false),
// rendering chats with its chat template (ChatTemplate::Load; without one, chats become
// "role: content" lines and a warning). Without tokenizer.json: `texts.size()` samples of random ids
// and a warning. Fails when tokenisation fails (e.g. invalid UTF-8) or no sample is left.
absl::StatusOr<TokenizedSamples> TokenizeCalibrationTexts(const std::string& model_dir,
                                                          const std::vector<CalibrationText>& texts,
                                                          const TokenizeOptions& options);

}  // namespace sparkserve::calib
