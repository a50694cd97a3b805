// PCRE2-backed pre-tokenizer regex with the \s rewrite (see split_regex.h).
#include "text/tokenizer/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "fmt/format.h"

namespace sparkserve::text {
namespace {

// Unicode White_Space (what Oniguruma's \s matches), as class contents.
constexpr std::string_view kWhitespaceClass =
    "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";
// Its complement over all code points, as class contents (usable inside another class).
constexpr std::string_view kNonWhitespaceClass =
    "\\x{0}-\\x{8}\\x{E}-\\x{1F}\\x{21}-\\x{84}\\x{86}-\\x{9F}\\x{A1}-\\x{167F}\\x{1681}-\\x{1FFF}"
    "\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{10FFFF}";

// Per general category: code points the HF engine (Oniguruma, newer Unicode) has in \p{X} that
// PCRE2 10.42 (Unicode 14) does not know.
struct ClassExtension {
  std::string_view name;
  std::string_view extra;  // class contents
};
constexpr ClassExtension kHfClassExtensions[] = {
#include "text/tokenizer/hf_unicode_classes.inc"
};

// The extra contents for \p{name}, or empty.
std::string_view ClassExtra(std::string_view name) {
  for (const auto& e : kHfClassExtensions) {
    if (e.name == name) return e.extra;
  }
  return {};
}

std::string Pcre2ErrorText(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return fmt::format("PCRE2 error {}", code);
  return std::string(reinterpret_cast<const char*>(buf));
}

// Per-thread match scratch: a one-pair match block and a JIT stack big enough for long inputs.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& ThreadScratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

}  // namespace

std::string RewriteForPcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  const size_t n = p.size();
  size_t i = 0;
  while (i < n) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= n) {
        out.push_back(c);
        break;
      }
      const char d = p[i + 1];
      if (d == 's' || d == 'S') {
        const std::string_view cls = d == 's' ? kWhitespaceClass : kNonWhitespaceClass;
        if (in_class) {
          out.append(cls);
        } else {
          out.append("[").append(cls).append("]");
        }
        i += 2;
        continue;
      }
      if (d == 'p' || d == 'P') {  // \pL or \p{Name}: add what newer Unicode put in the class
        size_t stop = i + 3;
        std::string_view name = p.substr(i + 2, 1);
        if (i + 2 < n && p[i + 2] == '{') {
          const size_t close = p.find('}', i + 3);
          stop = close == std::string_view::npos ? n : close + 1;
          name = p.substr(i + 3, stop - i - 4);
        }
        const std::string_view escape = p.substr(i, stop - i);
        const std::string_view extra = ClassExtra(name);
        if (extra.empty() || (d == 'P' && in_class)) {
          out.append(escape);  // (a negated class inside a class stays as PCRE2 knows it)
        } else if (in_class) {
          out.append(escape).append(extra);
        } else {
          out.append(d == 'P' ? "[^" : "[").append("\\p{").append(name).append("}").append(extra).append("]");
        }
        i = stop;
        continue;
      }
      if (d == 'Q') {  // \Q...\E: literal text, copied verbatim
        const size_t end = p.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? n : end + 2;
        out.append(p.substr(i, stop - i));
        i = stop;
        continue;
      }
      out.append(p.substr(i, 2));  // any other escape, including "\\"
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < n && p[i + 1] == ':') {  // POSIX class [:name:]
        const size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 2;
          continue;
        }
      }
      if (c == ']') in_class = false;
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(c);
    ++i;
    if (c == '[') {
      in_class = true;
      if (i < n && p[i] == '^') out.push_back(p[i++]);
      if (i < n && p[i] == ']') out.push_back(p[i++]);  // a leading ']' is literal
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SplitRegex>> SplitRegex::Compile(std::string_view pattern, bool literal) {
  std::unique_ptr<SplitRegex> re(new SplitRegex());
  re->pattern_ = literal ? std::string(pattern) : RewriteForPcre2(pattern);
  const uint32_t options = literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re->pattern_.data()), re->pattern_.size(),
                                   options, &error, &error_offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(fmt::format("cannot compile split regex /{}/ at offset {}: {}",
                                                  std::string(pattern), error_offset, Pcre2ErrorText(error)));
  }
  // JIT is an optimisation: when unavailable pcre2_match interprets the pattern instead.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  re->code_ = code;
  return re;
}

absl::Status SplitRegex::FindMatches(std::string_view text, std::vector<Piece>& out) const {
  size_t prev = 0;
  size_t search_at = 0;
  size_t last_match_end = std::string_view::npos;
  while (search_at <= text.size()) {
    size_t b = 0, e = 0;
    if (absl::Status s = Find(text, search_at, &b, &e); !s.ok()) return s;
    if (b == std::string_view::npos) break;
    if (b == e && last_match_end == e) {
      size_t step = 1;
      while (search_at + step < text.size() &&
             (static_cast<unsigned char>(text[search_at + step]) & 0xC0) == 0x80) {
        ++step;
      }
      search_at += step;
      continue;
    }
    search_at = e;
    last_match_end = e;
    if (b != prev) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return absl::OkStatus();
}

SplitRegex::~SplitRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

absl::Status SplitRegex::Find(std::string_view text, size_t start, size_t* begin, size_t* end) const {
  MatchScratch& scratch = ThreadScratch();
  const int rc = pcre2_match(static_cast<const pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()),
                             text.size(), start, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
  if (rc == PCRE2_ERROR_NOMATCH) {
    *begin = std::string_view::npos;
    return absl::OkStatus();
  }
  if (rc < 0) {
    return absl::InternalError(fmt::format("split regex /{}/ failed on a {}-byte text: {}", pattern_,
                                           text.size(), Pcre2ErrorText(rc)));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
  *begin = ov[0];
  *end = ov[1];
  return absl::OkStatus();
}

}  // namespace sparkserve::text
