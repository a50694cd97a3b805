// SplitRegex: a pre-tokenizer pattern compiled with PCRE2 (UTF + UCP + JIT) so that it splits text
// the way the Hugging Face library's Oniguruma engine does. Differences between the two engines,
// fixed by rewriting the pattern first: PCRE2's \s also matches U+180E, so \s and \S become explicit
// classes (FORMATS.md §4); Oniguruma's Unicode tables are newer (16 vs 14), so \p{L}, \p{M}, \p{N},
// \p{P}, \p{S} get the code points assigned since (hf_unicode_classes.inc, probed from HF).
// Thread-safe: match scratch space is per thread.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sparkserve::text {

// Rewrites an Oniguruma pattern for PCRE2: every \s and \S escape (outside or inside character
// classes) becomes the explicit White_Space class Oniguruma uses, and \p{X} / \pX / \P{X} for
// X in L, M, N, P, S gain the code points Oniguruma's newer tables add (\P{X} inside a class is
// left as is). Escaped backslashes ("\\s"), \Q..\E quotes and POSIX classes are left alone.
std::string RewriteForPcre2(std::string_view pattern);

class SplitRegex {
 public:
  // `literal`: the pattern is a plain string to find (tokenizer.json {"String": ...}).
  static absl::StatusOr<std::unique_ptr<SplitRegex>> Compile(std::string_view pattern, bool literal);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // One entry of the split: a match or the gap before/after one.
  struct Piece {
    size_t begin;
    size_t end;
    bool is_match;
  };
  // Appends to `out` the pieces covering `text` (valid UTF-8, non-empty), exactly as the Hugging
  // Face library lists them before applying a split behaviour: gaps and matches in order, including
  // empty matches (the onig crate's find_iter rejects an empty match right where the previous match
  // ended and moves on one character).
  absl::Status FindMatches(std::string_view text, std::vector<Piece>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  SplitRegex() = default;
  // Next match at or after `start`: {begin, end}; begin == npos when none. Error on engine failure.
  absl::Status Find(std::string_view text, size_t start, size_t* begin, size_t* end) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace sparkserve::text
