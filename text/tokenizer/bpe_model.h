// BpeModel: the tokenizer.json "model" of type BPE for byte-level tokenizers. Vocabulary strings
// (in the byte-level alphabet) are turned into raw bytes at load time, so a pre-token's bytes are
// the initial symbols; ranked merges are applied lowest rank first, leftmost first on ties (the
// order the Hugging Face BPE applies them in). Results per pre-token are cached (bounded, sharded,
// thread-safe).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace sparkserve::text {

using TokenId = int32_t;

class BpeModel {
 public:
  // From the tokenizer.json "model" object. Refuses: dropout, byte_fallback, a non-empty
  // continuing_subword_prefix / end_of_word_suffix, merges naming tokens missing from the vocab.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model);

  // Appends the ids of one pre-token (raw bytes, non-empty) to `out`.
  void EncodeWord(std::string_view bytes, std::vector<TokenId>& out) const;
  // The same without the cache; `use_heap` picks the priority-queue merge loop used for long
  // words instead of the linear scan used for short ones (both give the same ids; for tests).
  void EncodeWordUncached(std::string_view bytes, bool use_heap, std::vector<TokenId>& out) const;

  // Vocabulary lookups, in the byte-level string form used by tokenizer.json.
  std::optional<TokenId> TokenToId(std::string_view token) const;
  const std::string* IdToToken(TokenId id) const;  // nullptr when unknown
  size_t vocab_size() const { return vocab_.size(); }
  TokenId max_id() const { return static_cast<TokenId>(id_to_token_.size()) - 1; }

  size_t merge_count() const { return merges_.size(); }
  void ClearCache() const;

 private:
  struct Merge {
    uint32_t rank;
    TokenId new_id;
  };
  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* FindMerge(TokenId a, TokenId b) const {
    auto it = merges_.find(PairKey(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  // Initial symbols of a word (byte ids, unknown bytes as unk or dropped).
  void InitialSymbols(std::string_view bytes, std::vector<TokenId>& syms) const;
  void MergeLinear(std::vector<TokenId>& syms) const;
  void MergeHeap(std::vector<TokenId>& syms) const;

  absl::flat_hash_map<std::string, TokenId> vocab_;       // byte-level string -> id
  absl::flat_hash_map<std::string, TokenId> raw_vocab_;   // raw bytes -> id (only with ignore_merges)
  std::vector<std::string> id_to_token_;                  // byte-level strings; "" where no id
  std::vector<bool> id_present_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<TokenId, 256> byte_id_{};                    // -1: byte has no token
  std::optional<TokenId> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheShardCapacity = 8192;
  static constexpr size_t kMaxCachedWordBytes = 256;
  struct CacheShard {
    std::mutex mu;
    absl::flat_hash_map<std::string, std::vector<TokenId>> map;
  };
  mutable std::unique_ptr<CacheShard[]> cache_ = std::make_unique<CacheShard[]>(kCacheShards);
};

}  // namespace sparkserve::text
