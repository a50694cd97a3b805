// IncrementalDetokenizer: turns generated token ids, fed one at a time, into text pieces for
// streaming. A piece never ends inside a UTF-8 character: bytes that may still become a character
// are held until the next token decides them. Ill-formed bytes become U+FFFD exactly as the HF
// decoder does, so the concatenation of all pieces (Push... then Finish) equals
// Tokenizer::Decode(all ids).
#pragma once
#include <string>

#include "text/tokenizer/tokenizer.h"

namespace sparkserve::text {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Text made final by `id` (often empty for a token that ends mid-character). Unknown ids and,
  // with skip_special_tokens, special ones add nothing (as in Decode).
  std::string Push(TokenId id);
  // End of the sequence: the held bytes (an incomplete character becomes one U+FFFD).
  std::string Finish();

  // Bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // an incomplete but so far well-formed UTF-8 sequence
};

}  // namespace sparkserve::text
