// The GPT-2 bytes_to_unicode table (see byte_level.h).
#include "text/tokenizer/byte_level.h"

#include "text/tokenizer/utf8.h"

namespace sparkserve::text {

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte_.fill(-1);
  // Printable Latin-1 bytes stand for themselves; the rest take code points 256, 257, ... in order.
  auto self_mapped = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = self_mapped(b) ? static_cast<char32_t>(b) : next++;
    byte_to_char_[static_cast<size_t>(b)] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::Get() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

std::optional<std::string> ByteLevelAlphabet::ToBytes(std::string_view byte_level) const {
  std::string out;
  out.reserve(byte_level.size());
  size_t i = 0;
  while (i < byte_level.size()) {
    const char32_t c = DecodeUtf8At(byte_level, i);
    const auto b = ByteForChar(c);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

std::string ByteLevelAlphabet::FromBytes(std::string_view bytes) const {
  std::string out;
  for (char ch : bytes) AppendUtf8(byte_to_char_[static_cast<uint8_t>(ch)], out);
  return out;
}

}  // namespace sparkserve::text
