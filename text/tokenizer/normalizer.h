// Normalizer: the tokenizer.json "normalizer" (null, NFC/NFD/NFKC/NFKD, or a Sequence of those),
// applied through utf8proc. Input must be valid UTF-8.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace sparkserve::text {

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };

class Normalizer {
 public:
  // From the tokenizer.json value (null gives the identity). Unsupported types are refused by name.
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& j);

  bool is_identity() const { return steps_.empty(); }
  // Normalizes `text` into `out` (`out` is overwritten). Returns false if utf8proc fails (only on
  // invalid input, which callers rule out first).
  bool Apply(std::string_view text, std::string& out) const;

 private:
  std::vector<NormalForm> steps_;
};

}  // namespace sparkserve::text
