// Python str semantics over UTF-8 std::string: code points, whitespace, strip/split/replace/find,
// case mapping (utf8proc), splitlines, printability. Used by filters, methods and repr().
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparkserve::text::jinja {

std::u32string DecodeUtf8(std::string_view s);  // invalid bytes become U+FFFD
std::string EncodeUtf8(std::u32string_view s);
void AppendUtf8(std::string& out, char32_t c);
size_t CodepointCount(std::string_view s);

bool IsPySpace(char32_t c);      // str.isspace() / re's \s
bool IsPyPrintable(char32_t c);  // str.isprintable()
bool IsPyWordChar(char32_t c);   // re's \w
bool IsPyCased(char32_t c);
bool IsPyLineBreak(char32_t c);  // the boundaries str.splitlines() uses

// str.strip/lstrip/rstrip; `chars` empty optional means whitespace.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split/rsplit; no separator: runs of whitespace, empty pieces dropped. maxsplit < 0: no limit.
// Throws a runtime error for an empty separator (Python's ValueError).
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> PySplitlines(std::string_view s, bool keepends);
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// str.find/rfind: code-point index or -1. str.count: non-overlapping occurrences.
int64_t PyFind(std::string_view s, std::string_view sub, bool reverse);
int64_t PyCount(std::string_view s, std::string_view sub);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyCapitalize(std::string_view s);
std::string PyTitle(std::string_view s);  // str.title()
std::string PySwapcase(std::string_view s);

}  // namespace sparkserve::text::jinja
