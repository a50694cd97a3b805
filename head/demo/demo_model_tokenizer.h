// The demo model's own tokenizer: a small byte-level BPE (the 256 byte tokens, merges learnt from a
// built-in text, and the Qwen special/added tokens) as tokenizer.json, and tokenizer_config.json with
// the project's ChatML-style chat template (system/user/assistant/tool turns, tools, XML tool calls,
// enable_thinking). Deterministic: the same files on every run.
#pragma once
#include <cstdint>
#include <string>

namespace sparkserve::head {

struct DemoTokenizer {
  std::string tokenizer_json;         // Hugging Face `tokenizers` format (BPE, ByteLevel)
  std::string tokenizer_config_json;  // with "chat_template"
  int32_t num_tokens = 0;             // vocab + added tokens (ids 0 .. num_tokens-1)
  int32_t endoftext_id = 0;           // <|endoftext|>
  int32_t im_start_id = 0;            // <|im_start|>
  int32_t im_end_id = 0;              // <|im_end|>
};

// Learns up to `max_merges` merges from the built-in text (stopping when no pair repeats).
DemoTokenizer BuildDemoTokenizer(int max_merges = 600);

// The project's chat template (also written into tokenizer_config.json).
const std::string& DemoChatTemplate();

}  // namespace sparkserve::head
