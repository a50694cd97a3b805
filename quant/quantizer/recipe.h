// Quantisation recipes: which scheme (NVFP4, FP8 per channel, dense) each Linear module of a
// Qwen3.5 checkpoint gets. Built-in recipes (nvfp4-mixed, nvfp4, fp8, bf16) and JSON recipes.
//
// JSON recipe (every key optional; unknown keys are errors):
//   {"base": "nvfp4-mixed",                      built-in recipe consulted after `rules` (default: none,
//                                                i.e. everything dense)
//    "rules": {"re:.*mlp\\.down_proj$": "fp8",   module name (exact) or "re:" regex (Python re.match:
//              "lm_head": "dense"}               anchored at the start) -> "nvfp4" | "fp8" | "dense";
//                                                first match in file order wins, before the base rules
// Rules see module names: a 2-D tensor "X.weight" is module "X". Embeddings (embed_tokens), vision
// tower modules (model.visual.*) and every non-Linear tensor (norms, conv1d, A_log, dt_bias) stay
// dense whatever the rules say. A tied lm_head given a non-dense scheme is untied: written as
// lm_head.* from embed_tokens, with tie_word_embeddings false.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace sparkserve::quant {


enum class WeightScheme : uint8_t {
  kDense,  // stored as in the source (bf16/f16/f32)
  kNvfp4,  // nvfp4-pack-quantized, group 16, fp8 scales, f32 global scale
  kFp8,    // float-quantized, fp8 e4m3 weight, per-channel f32 scale
};
std::string_view WeightSchemeName(WeightScheme s);  // "dense" | "nvfp4" | "fp8"
absl::StatusOr<WeightScheme> ParseWeightScheme(std::string_view name);

class RegexMatcher;

struct RecipeRule {
  std::string target;  // exact module name or "re:" regex
  WeightScheme scheme = WeightScheme::kDense;
};

class Recipe {
 public:
  // "nvfp4-mixed" (default of `quantize`), "nvfp4", "fp8", "bf16" (everything dense).
  static absl::StatusOr<Recipe> BuiltIn(std::string_view name);
  // The recipe in JSON text; `source` names it in errors.
  static absl::StatusOr<Recipe> FromJson(std::string_view json_text, std::string_view source);
  // A built-in name, else a path to a JSON recipe file.
  static absl::StatusOr<Recipe> Load(const std::string& name_or_path);
  static std::vector<std::string> BuiltInNames();

  const std::string& name() const { return name_; }
  const std::vector<RecipeRule>& rules() const { return rules_; }
  // The scheme for Linear module `module` (first matching rule; dense when none matches).
  WeightScheme SchemeFor(std::string_view module) const;

 private:
  // Compiles the rules' regexes.
  static absl::StatusOr<Recipe> Make(std::string name, std::vector<RecipeRule> rules);

  std::string name_;
  std::vector<RecipeRule> rules_;
  std::shared_ptr<const RegexMatcher> matcher_;
};

// Compiled "re:" patterns with Python re.match semantics (anchored at the start only).
class RegexMatcher {
 public:
  static absl::StatusOr<std::shared_ptr<RegexMatcher>> Compile(const std::vector<std::string>& patterns);
  ~RegexMatcher();
  RegexMatcher(const RegexMatcher&) = delete;
  RegexMatcher& operator=(const RegexMatcher&) = delete;
  // Whether pattern `i` (as given to Compile, without "re:") matches at the start of `text`.
  bool Matches(size_t i, std::string_view text) const;

 private:
  RegexMatcher() = default;
  std::vector<void*> codes_;  // pcre2_code*
};

}  // namespace sparkserve::quant
