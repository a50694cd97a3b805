// PreTokenizer: the tokenizer.json "pre_tokenizer": Split steps (regex or literal, any split
// behaviour, invert) followed by a final ByteLevel step (add_prefix_space, use_regex = the GPT-2
// regex), possibly inside a Sequence. Produces the pre-tokens (raw bytes) that BPE encodes.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "text/tokenizer/split_regex.h"
#include "nlohmann/json_fwd.hpp"

namespace sparkserve::text {

// The GPT-2 pre-tokenization regex (ByteLevel with use_regex: true).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Refuses pre-tokenizer types other than Sequence/Split/ByteLevel, and chains that do not end
  // with ByteLevel (this is a byte-level BPE tokenizer).
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> FromJson(const nlohmann::json& j);

  // Calls on_word(bytes) for each non-empty pre-token of `text` (valid UTF-8), in order.
  absl::Status Run(std::string_view text, absl::FunctionRef<void(std::string_view)> on_word) const;

 private:
  struct Step {
    std::unique_ptr<SplitRegex> regex;  // null for a ByteLevel step without use_regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool byte_level = false;
    bool add_prefix_space = false;
  };
  absl::Status AddSteps(const nlohmann::json& j);
  absl::Status RunFrom(size_t step, std::string_view text, absl::FunctionRef<void(std::string_view)> on_word) const;

  std::vector<Step> steps_;
};

}  // namespace sparkserve::text
