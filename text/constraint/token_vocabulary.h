// TokenVocabulary: the model's token ids as the byte strings they add to the output, sorted so that
// tokens sharing a prefix are neighbours (a walk over them shares the work of the prefix). Ids with
// no text (special tokens, unknown or padding ids) never match grammar text. Immutable and shared
// by every grammar compiled for the model.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::text {
class Tokenizer;
}

namespace sparkserve::text::constraint {

class TokenVocabulary {
 public:
  // `token_bytes[id]` for ids 0 .. vocab_size-1 (missing or empty entries: no text).
  static std::shared_ptr<const TokenVocabulary> Create(std::vector<std::string> token_bytes, int32_t vocab_size);
  // The tokenizer's decode bytes; special tokens have no text (they are the caller's business: the
  // stop tokens are allowed when the grammar can end). Non-special added tokens (<tool_call>,
  // <think>) keep their text. `vocab_size` may exceed the tokenizer's ids (padding rows).
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer, int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }
  int32_t mask_words() const { return (vocab_size_ + 31) / 32; }
  std::string_view bytes(int32_t id) const {
    return std::string_view(data_).substr(offsets_[static_cast<size_t>(id)],
                                          offsets_[static_cast<size_t>(id) + 1] - offsets_[static_cast<size_t>(id)]);
  }
  // Ids with text, in byte order; lcp(i): bytes shared by sorted(i) and sorted(i - 1) (0 for i = 0).
  int32_t num_sorted() const { return static_cast<int32_t>(sorted_.size()); }
  int32_t sorted(int32_t i) const { return sorted_[static_cast<size_t>(i)]; }
  int32_t lcp(int32_t i) const { return lcp_[static_cast<size_t>(i)]; }
  int32_t max_token_bytes() const { return max_token_bytes_; }
  // Identifies the contents (cache keys of grammars compiled against it).
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  TokenVocabulary() = default;
  int32_t vocab_size_ = 0;
  std::string data_;
  std::vector<uint32_t> offsets_;  // [vocab_size + 1]
  std::vector<int32_t> sorted_;
  std::vector<int32_t> lcp_;
  int32_t max_token_bytes_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace sparkserve::text::constraint
