// Python str semantics over UTF-8: see string_ops.h.
#include "text/chat/jinja/string_ops.h"

#include <utf8proc.h>

#include "text/chat/jinja/error.h"

namespace sparkserve::text::jinja {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t n = utf8proc_iterate(p, left, &c);
    if (n <= 0) {
      out.push_back(0xFFFD);
      n = 1;
    } else {
      out.push_back(static_cast<char32_t>(c));
    }
    p += n;
    left -= n;
  }
  return out;
}

void AppendUtf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(out, c);
  return out;
}

size_t CodepointCount(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsPySpace(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsPyLineBreak(char32_t c) {
  switch (c) {
    case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E: case 0x85:
    case 0x2028: case 0x2029:
      return true;
    default:
      return false;
  }
}

bool IsPyPrintable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool IsPyWordChar(char32_t c) {
  if (c == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool IsPyCased(char32_t c) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

namespace {

// Python's full case mappings (SpecialCasing.txt) where they differ from the simple ones.
const char* SpecialUpper(char32_t c) {
  switch (c) {
    case 0xDF: return "SS";
    case 0x149: return "\u02BCN";
    case 0x1F0: return "J\u030C";
    case 0x587: return "\u0535\u0552";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05: case 0xFB06: return "ST";
    default: return nullptr;
  }
}

const char* SpecialTitle(char32_t c) {
  switch (c) {
    case 0xDF: return "Ss";
    case 0x149: return "\u02BCN";
    case 0x587: return "\u0535\u0582";
    case 0xFB00: return "Ff";
    case 0xFB01: return "Fi";
    case 0xFB02: return "Fl";
    case 0xFB03: return "Ffi";
    case 0xFB04: return "Ffl";
    case 0xFB05: case 0xFB06: return "St";
    default: return nullptr;
  }
}

const char* SpecialLower(char32_t c) { return c == 0x130 ? "i\u0307" : nullptr; }

char32_t Upper(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
char32_t Lower(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
char32_t Titlecase(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }

bool InSet(char32_t c, const std::u32string& set) { return set.find(c) != std::u32string::npos; }

}  // namespace

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string u = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip_this = [&](char32_t c) { return chars ? InSet(c, set) : IsPySpace(c); };
  size_t b = 0, e = u.size();
  if (left) while (b < e && strip_this(u[b])) ++b;
  if (right) while (e > b && strip_this(u[e - 1])) --e;
  return EncodeUtf8(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) ThrowRuntime("ValueError: empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = DecodeUtf8(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && IsPySpace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.push_back(EncodeUtf8(std::u32string_view(u).substr(i)));  // Python keeps trailing space
      break;
    }
    size_t j = i;
    while (j < u.size() && !IsPySpace(u[j])) ++j;
    out.push_back(EncodeUtf8(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) ThrowRuntime("ValueError: empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    std::u32string u = DecodeUtf8(s);
    size_t j = u.size();
    while (true) {
      while (j > 0 && IsPySpace(u[j - 1])) --j;
      if (j == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(EncodeUtf8(std::u32string_view(u).substr(0, j)));  // Python keeps leading space
        break;
      }
      size_t i = j;
      while (i > 0 && !IsPySpace(u[i - 1])) --i;
      out.push_back(EncodeUtf8(std::u32string_view(u).substr(i, j - i)));
      j = i;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> PySplitlines(std::string_view s, bool keepends) {
  std::u32string u = DecodeUtf8(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < u.size()) {
    if (!IsPyLineBreak(u[i])) {
      ++i;
      continue;
    }
    size_t brk_end = i + 1;
    if (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') brk_end = i + 2;
    size_t end = keepends ? brk_end : i;
    out.push_back(EncodeUtf8(std::u32string_view(u).substr(start, end - start)));
    start = i = brk_end;
  }
  if (start < u.size()) out.push_back(EncodeUtf8(std::u32string_view(u).substr(start)));
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    std::u32string u = DecodeUtf8(s);
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      AppendUtf8(out, c);
    }
    if (count < 0 || done < count) out.append(repl);
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t PyFind(std::string_view s, std::string_view sub, bool reverse) {
  size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(CodepointCount(s.substr(0, hit)));
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(CodepointCount(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

void AppendUpper(std::string& out, char32_t c) {
  if (const char* special = SpecialUpper(c)) out += special;
  else AppendUtf8(out, Upper(c));
}

void AppendLower(std::string& out, char32_t c) {
  if (const char* special = SpecialLower(c)) out += special;
  else AppendUtf8(out, Lower(c));
}

void AppendTitle(std::string& out, char32_t c) {
  if (const char* special = SpecialTitle(c)) out += special;
  else AppendUtf8(out, Titlecase(c));
}

std::string PyUpper(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) AppendUpper(out, c);
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) AppendLower(out, c);
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::u32string u = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < u.size(); ++i) {
    if (i == 0) AppendTitle(out, u[i]);
    else AppendLower(out, u[i]);
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (prev_cased) AppendLower(out, c);
    else AppendTitle(out, c);
    prev_cased = IsPyCased(c);
  }
  return out;
}

std::string PySwapcase(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) {
    if (Upper(c) != c || SpecialUpper(c)) AppendUpper(out, c);
    else AppendLower(out, c);
  }
  return out;
}

}  // namespace sparkserve::text::jinja
