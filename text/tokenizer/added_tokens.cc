// Added-token matching with Hugging Face AddedVocabulary semantics (see added_tokens.h).
#include "text/tokenizer/added_tokens.h"

#include <algorithm>

#include "text/tokenizer/utf8.h"
#include "utf8proc.h"

namespace sparkserve::text {
namespace {

// Unicode White_Space (Rust regex \s).
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex \w: Alphabetic, marks, decimal digits, connector punctuation, joiners. Alphabetic is
// approximated by letters, letter numbers and the Other_Alphabetic symbols (circled letters).
bool IsWordChar(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Start of the code point that ends at text[end) (text valid UTF-8, end > 0).
size_t PrevCharStart(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t CharBefore(std::string_view text, size_t end) {
  size_t i = PrevCharStart(text, end);
  return DecodeUtf8At(text, i);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  terminal_.push_back(-1);
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    first_byte_[static_cast<uint8_t>(s[0])] = true;
    int32_t node = 0;
    for (char ch : s) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(ch);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    if (terminal_[static_cast<size_t>(node)] < 0) terminal_[static_cast<size_t>(node)] = static_cast<int32_t>(t);
  }
}

int AddedTokenMatcher::LongestMatchAt(std::string_view text, size_t pos) const {
  int best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]);
    auto it = edges_.find(key);
    if (it == edges_.end()) break;
    node = it->second;
    if (terminal_[static_cast<size_t>(node)] >= 0) best = terminal_[static_cast<size_t>(node)];
  }
  return best;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t start_offset = 0;  // end of the previous segment
  size_t pos = 0;           // where the next match may start (matches never overlap)
  const size_t n = text.size();
  if (!tokens_.empty()) {
    while (pos < n) {
      if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
        ++pos;
        continue;
      }
      const int t = LongestMatchAt(text, pos);
      if (t < 0) {
        ++pos;
        continue;
      }
      const AddedToken& tok = tokens_[static_cast<size_t>(t)];
      size_t start = pos;
      size_t stop = pos + tok.content.size();
      pos = stop;
      if (tok.single_word) {
        const bool start_space = start == 0 || !IsWordChar(CharBefore(text, start));
        size_t j = stop;
        const bool stop_space = stop == n || !IsWordChar(DecodeUtf8At(text, j));
        if (!start_space || !stop_space) continue;  // inside a word: not this token
      }
      if (tok.lstrip) {
        size_t s = start;
        while (s > 0) {
          const size_t prev = PrevCharStart(text, s);
          size_t k = prev;
          if (!IsWhiteSpace(DecodeUtf8At(text, k))) break;
          s = prev;
        }
        start = std::max(s, start_offset);  // spaces already taken by the previous match stay there
      }
      if (tok.rstrip) {
        size_t e = stop;
        while (e < n) {
          size_t k = e;
          if (!IsWhiteSpace(DecodeUtf8At(text, k))) break;
          e = k;
        }
        stop = e;
      }
      if (start_offset < start) out.push_back({start_offset, start, -1});
      out.push_back({start, stop, static_cast<int64_t>(tok.id)});
      start_offset = stop;
    }
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

}  // namespace sparkserve::text
