// UTF-8 validation and maximal-subpart lossy conversion (see utf8.h).
#include "text/tokenizer/utf8.h"

namespace sparkserve::text {
namespace {

// Per Unicode Table 3-7 (well-formed UTF-8 byte sequences): for a lead byte, the sequence length
// and the allowed range of the second byte (later bytes are always 80..BF). Length 0 = invalid lead.
struct LeadInfo {
  uint8_t length;
  uint8_t second_lo;
  uint8_t second_hi;
};

constexpr LeadInfo Lead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes of the sequence starting at s[i] are well-formed so far (1..length), and whether
// the whole sequence is complete. An invalid lead byte gives {0, false}.
struct SequenceScan {
  size_t valid;   // bytes that belong to the (possibly partial) sequence
  bool complete;  // valid == expected length
  bool truncated; // ran out of input while still well-formed
};

inline SequenceScan Scan(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const LeadInfo info = Lead(b0);
  if (info.length == 0) return {0, false, false};
  if (info.length == 1) return {1, true, false};
  size_t n = 1;
  for (; n < info.length; ++n) {
    if (i + n >= s.size()) return {n, false, true};
    const auto b = static_cast<unsigned char>(s[i + n]);
    const uint8_t lo = n == 1 ? info.second_lo : 0x80;
    const uint8_t hi = n == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return {n, false, false};
  }
  return {n, true, false};
}

}  // namespace

size_t ValidUtf8PrefixLength(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const SequenceScan scan = Scan(s, i);
    if (!scan.complete) return i;
    i += scan.valid;
  }
  return n;
}

size_t AppendUtf8Lossy(std::string_view bytes, std::string& out, bool stop_at_truncated_tail) {
  size_t i = 0;
  const size_t n = bytes.size();
  size_t run_start = 0;  // start of the pending run of valid bytes, copied in one go
  while (i < n) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    const SequenceScan scan = Scan(bytes, i);
    if (scan.complete) {
      i += scan.valid;
      continue;
    }
    out.append(bytes.data() + run_start, i - run_start);
    if (scan.truncated && stop_at_truncated_tail) return i;
    out.append(kReplacementChar);
    i += scan.valid == 0 ? 1 : scan.valid;  // the maximal subpart, or the lone bad byte
    run_start = i;
  }
  out.append(bytes.data() + run_start, n - run_start);
  return n;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace sparkserve::text
