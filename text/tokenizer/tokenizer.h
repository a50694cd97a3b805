// Tokenizer: a byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json, producing the
// same ids as the Hugging Face `tokenizers` library. Pipeline: UTF-8 check -> added tokens
// (raw-text group) -> normalizer -> added tokens (normalized group) -> pre-tokenizer (Split
// regexes, ByteLevel) -> BPE -> post-processor. Components the file declares but this class does
// not implement are refused at load time with an error naming them. Thread-safe after loading.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "text/tokenizer/added_tokens.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/normalizer.h"
#include "nlohmann/json_fwd.hpp"

namespace sparkserve::text {

class PreTokenizer;

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJsonText(std::string_view json_text);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(const nlohmann::json& j);
  ~Tokenizer();

  // Token ids of `text`. Invalid UTF-8 is an InvalidArgument error naming the byte offset (no
  // replacement: the caller decides). `add_special_tokens` applies the post-processor's template
  // (as the HF library's default does); chat prompts already hold their special tokens and pass false.
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text, bool add_special_tokens = true) const;

  // Text of `ids`, as the HF library's decode: unknown ids are skipped, each token's bytes are
  // concatenated and ill-formed UTF-8 becomes U+FFFD (maximal subparts).
  std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens) const;

  // Raw bytes a token contributes to decoded text (may be part of a UTF-8 character); nullptr for
  // an unknown id.
  const std::string* TokenBytes(TokenId id) const {
    if (id < 0 || static_cast<size_t>(id) >= decode_bytes_.size() || !known_[static_cast<size_t>(id)]) {
      return nullptr;
    }
    return &decode_bytes_[static_cast<size_t>(id)];
  }
  bool IsSpecial(TokenId id) const {
    return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[static_cast<size_t>(id)];
  }

  // Added tokens first, then the model vocab (byte-level form, e.g. "Ġhello").
  std::optional<TokenId> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(TokenId id) const;
  // One past the largest id (the embedding rows a model needs at least).
  size_t id_space_size() const { return decode_bytes_.size(); }
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  const BpeModel& model() const { return *model_; }

 private:
  Tokenizer();
  absl::Status EncodeGap(std::string_view text, std::vector<TokenId>& out) const;
  absl::Status EncodeNormalized(std::string_view text, std::vector<TokenId>& out) const;

  Normalizer normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_tokens_;
  absl::flat_hash_map<std::string, TokenId> added_ids_;  // content -> id
  AddedTokenMatcher raw_added_;         // normalized == false: matched in the input text
  AddedTokenMatcher normalized_added_;  // normalized == true: matched in normalized text
  std::vector<TokenId> prefix_ids_;     // post-processor template around the sequence
  std::vector<TokenId> suffix_ids_;
  std::vector<std::string> decode_bytes_;  // per id
  std::vector<bool> known_;
  std::vector<bool> special_;
};

}  // namespace sparkserve::text
