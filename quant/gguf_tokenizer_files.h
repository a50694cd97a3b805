// The tokenizer of a GGUF file (`tokenizer.ggml.*`, llama.cpp's "gpt2" byte-level BPE) written back
// as the Hugging Face files text/ reads: tokenizer.json (vocabulary: the NORMAL tokens; merges;
// added tokens: CONTROL ones special, USER_DEFINED ones not; NFC and the split regex of
// `tokenizer.ggml.pre`: qwen2 or qwen35), tokenizer_config.json (`tokenizer.chat_template`, the
// bos/eos/pad tokens) and generation_config.json (eos ids). quant/ builds the JSON text, so text/
// needs nothing of GGUF (DESIGN §2).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/gguf_reader.h"

namespace sparkserve::quant {

struct GgufTokenizerFiles {
  std::string tokenizer_json, tokenizer_config_json, generation_config_json;
  std::vector<int64_t> eos_ids;
  std::optional<int64_t> bos_id;
};

absl::StatusOr<GgufTokenizerFiles> BuildGgufTokenizerFiles(const GgufFile& f);

}  // namespace sparkserve::quant
