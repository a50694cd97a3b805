// Unicode normal forms through utf8proc (see normalizer.h).
#include "head/tokenizer/normalizer.h"

#include <cstdlib>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "utf8proc.h"

namespace sparkserve::tokenizer {
namespace {

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

// Below U+0300 every character is unchanged by NFC (each is NFC_Quick_Check=Yes and none composes
// with a later character: combining marks start at U+0300), so such text needs no work.
bool AllBelowU0300(std::string_view s) {
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) >= 0xCC) return false;  // lead byte of U+0300 and above
  }
  return true;
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& j) {
  Normalizer n;
  if (absl::Status s = AddSteps(j, n.steps_); !s.ok()) return s;
  return n;
}

bool Normalizer::Apply(std::string_view text, std::string& out) const {
  out.assign(text);
  for (NormalForm form : steps_) {
    const bool compat = form == NormalForm::kNFKC || form == NormalForm::kNFKD;
    if (form == NormalForm::kNFC && AllBelowU0300(out)) continue;
    int options = UTF8PROC_STABLE;
    options |= (form == NormalForm::kNFC || form == NormalForm::kNFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (compat) options |= UTF8PROC_COMPAT;
    if (out.empty()) continue;
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(out.data()),
                                              static_cast<utf8proc_ssize_t>(out.size()), &result,
                                              static_cast<utf8proc_option_t>(options));
    if (len < 0) return false;
    out.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
    std::free(result);
  }
  return true;
}

}  // namespace sparkserve::tokenizer
