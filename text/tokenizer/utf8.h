// UTF-8 helpers for the tokenizer: strict validation, code point iteration, and the lossy
// conversion the Hugging Face decoder applies (Rust String::from_utf8_lossy: every maximal
// subpart of an ill-formed sequence becomes one U+FFFD, per Unicode §3.9 "U+FFFD substitution").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sparkserve::text {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the longest well-formed prefix of `s` (== s.size() when `s` is valid UTF-8).
size_t ValidUtf8PrefixLength(std::string_view s);

inline bool IsValidUtf8(std::string_view s) { return ValidUtf8PrefixLength(s) == s.size(); }

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with U+FFFD.
// With `stop_at_truncated_tail`, a trailing sequence that is well-formed so far but incomplete
// (it could still be completed by more bytes) is not consumed; the return value is the number of
// bytes consumed (== bytes.size() otherwise).
size_t AppendUtf8Lossy(std::string_view bytes, std::string& out, bool stop_at_truncated_tail = false);

inline std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  AppendUtf8Lossy(bytes, out);
  return out;
}

// Decodes the code point at s[i] of a string already known to be valid UTF-8; advances `i`.
inline char32_t DecodeUtf8At(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    char32_t c = ((b0 & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
    i += 2;
    return c;
  }
  if (b0 < 0xF0) {
    char32_t c = ((b0 & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
    i += 3;
    return c;
  }
  char32_t c = ((b0 & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
               ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
               (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
  i += 4;
  return c;
}

// Appends the UTF-8 encoding of `c` (a Unicode scalar value) to `out`.
void AppendUtf8(char32_t c, std::string& out);

}  // namespace sparkserve::text
