// The GPT-2 byte-level alphabet: each byte 0..255 is shown as one printable code point in
// vocabulary strings ("Ġ" is the space byte). Vocab entries are converted to raw bytes at load time
// so that encoding works on bytes directly.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sparkserve::text {

class ByteLevelAlphabet {
 public:
  static const ByteLevelAlphabet& Get();

  // The code point that stands for byte `b`.
  char32_t CharForByte(uint8_t b) const { return byte_to_char_[b]; }
  // The byte a code point stands for, or nullopt if it is not in the alphabet.
  std::optional<uint8_t> ByteForChar(char32_t c) const {
    if (c >= char_to_byte_.size() || char_to_byte_[c] < 0) return std::nullopt;
    return static_cast<uint8_t>(char_to_byte_[c]);
  }
  // Byte-level string (valid UTF-8 of alphabet characters) -> raw bytes; nullopt when some
  // character is outside the alphabet.
  std::optional<std::string> ToBytes(std::string_view byte_level) const;
  // Raw bytes -> byte-level string.
  std::string FromBytes(std::string_view bytes) const;

 private:
  ByteLevelAlphabet();
  std::array<char32_t, 256> byte_to_char_{};
  std::array<int16_t, 324> char_to_byte_{};  // every alphabet code point is < 324
};

}  // namespace sparkserve::text
