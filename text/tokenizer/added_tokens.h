// AddedTokens: the tokenizer.json "added_tokens" (special tokens and other literal tokens), found
// in text before any splitting, the way the Hugging Face AddedVocabulary does: leftmost-longest
// matching, with the `single_word`, `lstrip` and `rstrip` flags. Tokens with `normalized: false`
// are matched in the raw text, the others in the normalized gaps between those.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace sparkserve::text {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool special = false;     // skipped by decode(skip_special_tokens)
  bool normalized = false;  // matched against normalized text
  bool lstrip = false;      // swallows the whitespace on its left
  bool rstrip = false;      // swallows the whitespace on its right
  bool single_word = false; // only matches when not inside a word
};

// A piece of text: either an added token (token_id >= 0) or a gap to tokenize normally.
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int64_t token_id = -1;
};

// Finds one group of added tokens (the raw-text group or the normalized group).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` are the tokens of this group; their `content` is the pattern searched for.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  // Appends the segments covering `text` (valid UTF-8), in order, to `out`. Segment offsets are
  // relative to `text`. With no tokens, one gap segment covering the text (none for empty text).
  void Split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  // Longest token matching at text[pos], as an index into tokens_, or -1.
  int LongestMatchAt(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
  // Byte trie: (node << 8 | byte) -> child node; node 0 is the root.
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_;  // per node: token index ending there, or -1
};

}  // namespace sparkserve::text
