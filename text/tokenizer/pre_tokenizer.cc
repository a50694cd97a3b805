// Pre-tokenizer chain with Hugging Face split semantics (see pre_tokenizer.h).
#include "text/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text {
namespace {

struct Range {
  size_t begin;
  size_t end;
};

// Per-thread scratch, one slot per pre-tokenizer step, reused across calls.
struct SplitScratch {
  std::vector<std::vector<SplitRegex::Piece>> pieces;
  std::vector<std::vector<Range>> ranges;
};
thread_local SplitScratch t_scratch;

// Applies a split behaviour to the matcher's pieces (as NormalizedString::split does) and
// appends the kept ranges to `out`.
void ApplyBehavior(const std::vector<SplitRegex::Piece>& pieces, SplitBehavior behavior, bool invert,
                   std::vector<Range>& out) {
  auto is_match = [invert](const SplitRegex::Piece& p) { return p.is_match != invert; };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& p : pieces) out.push_back({p.begin, p.end});
      return;
    case SplitBehavior::kRemoved:
      for (const auto& p : pieces) {
        if (!is_match(p)) out.push_back({p.begin, p.end});
      }
      return;
    case SplitBehavior::kContiguous: {
      const size_t first = out.size();
      bool previous = false;
      for (const auto& p : pieces) {
        if (is_match(p) == previous && out.size() > first) {
          out.back().end = p.end;
        } else {
          out.push_back({p.begin, p.end});
        }
        previous = is_match(p);
      }
      return;
    }
    case SplitBehavior::kMergedWithPrevious: {
      const size_t first = out.size();
      bool previous = false;
      for (const auto& p : pieces) {
        if (is_match(p) && !previous && out.size() > first) {
          out.back().end = p.end;
        } else {
          out.push_back({p.begin, p.end});
        }
        previous = is_match(p);
      }
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      const size_t first = out.size();
      bool previous = false;
      for (size_t i = pieces.size(); i-- > 0;) {
        const auto& p = pieces[i];
        if (is_match(p) && !previous && out.size() > first) {
          out.back().begin = p.begin;
        } else {
          out.push_back({p.begin, p.end});
        }
        previous = is_match(p);
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      return;
    }
  }
}

absl::StatusOr<SplitBehavior> ParseBehavior(const nlohmann::json& j) {
  const std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(fmt::format("Split pre-tokenizer: unknown behavior {}", j.dump()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const nlohmann::json& j) {
  auto pt = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  if (absl::Status s = pt->AddSteps(j); !s.ok()) return s;
  for (size_t i = 0; i + 1 < pt->steps_.size(); ++i) {
    if (pt->steps_[i].byte_level) {
      return absl::UnimplementedError("pre_tokenizer: ByteLevel must be the last step of the Sequence");
    }
  }
  if (pt->steps_.empty() || !pt->steps_.back().byte_level) {
    return absl::UnimplementedError(
        "pre_tokenizer must end with ByteLevel (only byte-level BPE tokenizers are supported)");
  }
  return pt;
}

absl::Status PreTokenizer::AddSteps(const nlohmann::json& j) {
  if (j.is_null()) return absl::OkStatus();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return absl::InvalidArgumentError("pre_tokenizer: expected an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: missing \"pretokenizers\" list");
    }
    for (const auto& sub : j["pretokenizers"]) {
      if (absl::Status s = AddSteps(sub); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "Split") {
    const auto& pattern = j.contains("pattern") ? j["pattern"] : nlohmann::json();
    bool literal = false;
    std::string text;
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      text = pattern["Regex"].get<std::string>();
    } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      text = pattern["String"].get<std::string>();
      literal = true;
    } else {
      return absl::InvalidArgumentError("Split pre-tokenizer: \"pattern\" must be {\"Regex\": ..} or {\"String\": ..}");
    }
    auto regex = SplitRegex::Compile(text, literal);
    if (!regex.ok()) return regex.status();
    step.regex = std::move(*regex);
    auto behavior = ParseBehavior(j.contains("behavior") ? j["behavior"] : nlohmann::json());
    if (!behavior.ok()) return behavior.status();
    step.behavior = *behavior;
    step.invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = j.value("add_prefix_space", true);
    if (j.value("use_regex", true)) {
      auto regex = SplitRegex::Compile(kGpt2SplitPattern, false);
      if (!regex.ok()) return regex.status();
      step.regex = std::move(*regex);
    }
  } else {
    return absl::UnimplementedError(fmt::format(
        "unsupported pre_tokenizer type \"{}\" (supported: Sequence, Split, ByteLevel)", type));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PreTokenizer::Run(std::string_view text, absl::FunctionRef<void(std::string_view)> on_word) const {
  if (text.empty()) return absl::OkStatus();
  if (t_scratch.pieces.size() < steps_.size()) {  // sized before recursing: no slot moves later
    t_scratch.pieces.resize(steps_.size());
    t_scratch.ranges.resize(steps_.size());
  }
  return RunFrom(0, text, on_word);
}

absl::Status PreTokenizer::RunFrom(size_t index, std::string_view text,
                                   absl::FunctionRef<void(std::string_view)> on_word) const {
  if (index == steps_.size()) {
    on_word(text);
    return absl::OkStatus();
  }
  const Step& step = steps_[index];
  std::string prefixed;
  if (step.add_prefix_space && text[0] != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  if (!step.regex) return RunFrom(index + 1, text, on_word);

  std::vector<SplitRegex::Piece>& pieces = t_scratch.pieces[index];
  std::vector<Range>& ranges = t_scratch.ranges[index];
  pieces.clear();
  ranges.clear();
  if (absl::Status s = step.regex->FindMatches(text, pieces); !s.ok()) return s;
  ApplyBehavior(pieces, step.behavior, step.invert, ranges);
  for (const Range& r : ranges) {
    if (r.end > r.begin) {
      if (absl::Status s = RunFrom(index + 1, text.substr(r.begin, r.end - r.begin), on_word); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::text
