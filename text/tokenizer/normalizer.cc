// Unicode normal forms through utf8proc, as the Hugging Face library computes them (see normalizer.h).
#include "text/tokenizer/normalizer.h"

#include <algorithm>
#include <iterator>

#include "fmt/format.h"
#include "text/tokenizer/utf8.h"
#include "nlohmann/json.hpp"
#include "utf8proc.h"

namespace sparkserve::text {
namespace {

// Code points the HF library's normalization tables do not know (added in later Unicode versions
// than its normalization crate's), so HF leaves them alone and treats them as plain starters:
// combining marks of Unicode 10+ and the Dives Akuru composition pair. utf8proc knows them, so
// text is cut around them and they are copied unchanged. Found by probing every code point with
// tests/golden/tokenizer/probe_hf_normalizer.py (tokenizers 0.23.3 vs utf8proc 2.8).
constexpr char32_t kHfUnknownRanges[][2] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0xA82C, 0xA82C},
    {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E},
    {0x11839, 0x1183A}, {0x11930, 0x11930}, {0x11938, 0x11938}, {0x1193D, 0x1193E},
    {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
    {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97},
    {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
};

bool IsHfUnknown(char32_t c) {
  if (c < 0x7FD) return false;
  auto it = std::upper_bound(std::begin(kHfUnknownRanges), std::end(kHfUnknownRanges), c,
                             [](char32_t v, const char32_t (&r)[2]) { return v < r[0]; });
  if (it == std::begin(kHfUnknownRanges)) return false;
  --it;
  return c <= (*it)[1];
}

// What a character means for normalization of the text around it.
enum class CharClass {
  kStable,     // a boundary: nothing before it interacts with it or after it through it
  kUnknown,    // HF-unknown: a boundary on both sides, copied unchanged
  kNeedsWork,  // may change or interact with neighbours (mark, decomposable, composes with previous)
};

CharClass Classify(char32_t c, NormalForm form) {
  if (c < 0x80) return CharClass::kStable;
  const bool composing = form == NormalForm::kNFC || form == NormalForm::kNFKC;
  // Below U+0300 nothing changes under NFC (no mark, nothing composes with what precedes it).
  if (c < 0x300 && form == NormalForm::kNFC) return CharClass::kStable;
  if (IsHfUnknown(c)) return CharClass::kUnknown;
  if (c >= 0x1100 && c <= 0x11FF) {  // conjoining jamo: vowels and trailing consonants compose
    return composing && c < 0x1161 ? CharClass::kStable : CharClass::kNeedsWork;
  }
  if (c >= 0xAC00 && c <= 0xD7A3) return composing ? CharClass::kStable : CharClass::kNeedsWork;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  const bool second = p->comb_index != 0xFFFF && (p->comb_index & 0x8000) != 0;
  if (p->combining_class != 0 || p->decomp_seqindex != 0xFFFF || second) return CharClass::kNeedsWork;
  return CharClass::kStable;
}

absl::Status AddSteps(const nlohmann::json& j, std::vector<NormalForm>& steps) {
  if (j.is_null()) return absl::OkStatus();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError("normalizer: expected an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC") {
    steps.push_back(NormalForm::kNFC);
  } else if (type == "NFD") {
    steps.push_back(NormalForm::kNFD);
  } else if (type == "NFKC") {
    steps.push_back(NormalForm::kNFKC);
  } else if (type == "NFKD") {
    steps.push_back(NormalForm::kNFKD);
  } else if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: missing \"normalizers\" list");
    }
    for (const auto& sub : j["normalizers"]) {
      if (absl::Status s = AddSteps(sub, steps); !s.ok()) return s;
    }
  } else {
    return absl::UnimplementedError(fmt::format(
        "unsupported normalizer type \"{}\" (supported: NFC, NFD, NFKC, NFKD, Sequence, null)", type));
  }
  return absl::OkStatus();
}

// Normalizes one stretch with utf8proc's tables: per-character decomposition, canonical ordering
// (a stable sort of each run of marks by combining class: utf8proc_map's own reordering is a gnome
// sort, quadratic on long runs of marks), then utf8proc's composition.
bool NormalizeStretch(std::string_view text, NormalForm form, std::string& out) {
  const bool composing = form == NormalForm::kNFC || form == NormalForm::kNFKC;
  int options = UTF8PROC_STABLE | (composing ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE);
  if (form == NormalForm::kNFKC || form == NormalForm::kNFKD) options |= UTF8PROC_COMPAT;
  thread_local std::vector<utf8proc_int32_t> buf;
  buf.clear();
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<utf8proc_int32_t>(DecodeUtf8At(text, i));
    utf8proc_int32_t decomposed[32];  // the longest decomposition (U+FDFA, compatibility) has 18
    int boundclass = 0;
    const utf8proc_ssize_t n =
        utf8proc_decompose_char(c, decomposed, 32, static_cast<utf8proc_option_t>(options), &boundclass);
    if (n < 0 || n > 32) return false;
    buf.insert(buf.end(), decomposed, decomposed + n);
  }
  auto ccc = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
  for (size_t k = 0; k < buf.size();) {
    if (ccc(buf[k]) == 0) {
      ++k;
      continue;
    }
    size_t e = k + 1;
    while (e < buf.size() && ccc(buf[e]) != 0) ++e;
    if (e - k > 1) {
      std::stable_sort(buf.begin() + static_cast<std::ptrdiff_t>(k), buf.begin() + static_cast<std::ptrdiff_t>(e),
                       [&](utf8proc_int32_t x, utf8proc_int32_t y) { return ccc(x) < ccc(y); });
    }
    k = e;
  }
  size_t len = buf.size();
  if (composing && len > 0) {
    const utf8proc_ssize_t r = utf8proc_normalize_utf32(buf.data(), static_cast<utf8proc_ssize_t>(len),
                                                        static_cast<utf8proc_option_t>(options));
    if (r < 0) return false;
    len = static_cast<size_t>(r);
  }
  for (size_t k = 0; k < len; ++k) AppendUtf8(static_cast<char32_t>(buf[k]), out);
  return true;
}

// One normal form over `text` into `out`: stable stretches are copied, and each stretch from the
// last boundary before a character that needs work to the next boundary after it goes through
// utf8proc. Normalization never crosses a boundary, so this equals normalizing the whole text.
bool NormalizeOnce(std::string_view text, NormalForm form, std::string& out) {
  out.clear();
  out.reserve(text.size());
  size_t copied = 0;    // text[0, copied) is in `out`
  size_t boundary = 0;  // last boundary seen at or after `copied`
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII: stable
      boundary = i++;
      continue;
    }
    const size_t start = i;
    const CharClass cls = Classify(DecodeUtf8At(text, i), form);
    if (cls == CharClass::kStable) {
      boundary = start;
      continue;
    }
    if (cls == CharClass::kUnknown) {
      boundary = i;  // the stretch before it ends at `start`, which is also a boundary
      continue;
    }
    // Needs work: extend to the next boundary.
    size_t end = i;
    while (end < n) {
      size_t k = end;
      if (Classify(DecodeUtf8At(text, k), form) != CharClass::kNeedsWork) break;
      end = k;
    }
    out.append(text.substr(copied, boundary - copied));
    if (!NormalizeStretch(text.substr(boundary, end - boundary), form, out)) return false;
    copied = boundary = i = end;
  }
  out.append(text.substr(copied));
  return true;
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& j) {
  Normalizer n;
  if (absl::Status s = AddSteps(j, n.steps_); !s.ok()) return s;
  return n;
}

bool Normalizer::Apply(std::string_view text, std::string& out) const {
  if (steps_.empty()) {
    out.assign(text);
    return true;
  }
  std::string current(text);
  for (NormalForm form : steps_) {
    if (!NormalizeOnce(current, form, out)) return false;
    current.swap(out);
  }
  out.swap(current);
  return true;
}

}  // namespace sparkserve::text
