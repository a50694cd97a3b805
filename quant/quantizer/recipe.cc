// Built-in and JSON quantisation recipes (see recipe.h).
#include "quant/quantizer/recipe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {
namespace {

// Text-model prefix of either checkpoint layout: "model." or "model.language_model.".
constexpr const char* kLayers = R"(re:^model\.(language_model\.)?layers\.\d+\.)";

std::string LayerRule(const char* rest) { return std::string(kLayers) + rest; }

}  // namespace

std::string_view WeightSchemeName(WeightScheme s) {
  switch (s) {
    case WeightScheme::kNvfp4: return "nvfp4";
    case WeightScheme::kFp8: return "fp8";
    case WeightScheme::kDense: break;
  }
  return "dense";
}

absl::StatusOr<WeightScheme> ParseWeightScheme(std::string_view name) {
  if (name == "nvfp4") return WeightScheme::kNvfp4;
  if (name == "fp8") return WeightScheme::kFp8;
  if (name == "dense") return WeightScheme::kDense;
  return absl::InvalidArgumentError(
      fmt::format("unknown scheme \"{}\" (expected nvfp4, fp8 or dense)", std::string(name)));
}

absl::StatusOr<std::shared_ptr<RegexMatcher>> RegexMatcher::Compile(const std::vector<std::string>& patterns) {
  std::shared_ptr<RegexMatcher> m(new RegexMatcher());
  for (const std::string& p : patterns) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP,
                                     &err, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return absl::InvalidArgumentError(fmt::format("invalid regex \"{}\" at offset {}: {}", p, offset,
                                                    reinterpret_cast<const char*>(msg)));
    }
    m->codes_.push_back(code);
  }
  return m;
}

RegexMatcher::~RegexMatcher() {
  for (void* c : codes_) pcre2_code_free(static_cast<pcre2_code*>(c));
}

bool RegexMatcher::Matches(size_t i, std::string_view text) const {
  auto* code = static_cast<pcre2_code*>(codes_[i]);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, PCRE2_ANCHORED, md,
                             nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

std::vector<std::string> Recipe::BuiltInNames() { return {"nvfp4-mixed", "nvfp4", "fp8", "bf16"}; }

absl::StatusOr<Recipe> Recipe::Make(std::string name, std::vector<RecipeRule> rules) {
  std::vector<std::string> patterns;
  for (const RecipeRule& r : rules) {
    // Exact-name rules get a never-matching placeholder so indices line up.
    patterns.push_back(r.target.rfind("re:", 0) == 0 ? r.target.substr(3) : std::string(R"((?!))"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<RegexMatcher> m, RegexMatcher::Compile(patterns));
  Recipe rec;
  rec.name_ = std::move(name);
  rec.rules_ = std::move(rules);
  rec.matcher_ = std::move(m);
  return rec;
}

absl::StatusOr<Recipe> Recipe::BuiltIn(std::string_view name) {
  using S = WeightScheme;
  std::vector<RecipeRule> rules;
  if (name == "nvfp4-mixed") {
    rules = {{LayerRule(R"(mlp\.(gate|up|down)_proj$)"), S::kNvfp4},
             {LayerRule(R"(self_attn\.(q|k|v|o)_proj$)"), S::kNvfp4},
             {LayerRule(R"(linear_attn\.(in_proj_qkv|in_proj_z|out_proj)$)"), S::kFp8},
             {"lm_head", S::kFp8}};
  } else if (name == "nvfp4") {
    rules = {{LayerRule(R"(mlp\.(gate|up|down)_proj$)"), S::kNvfp4},
             {LayerRule(R"(self_attn\.(q|k|v|o)_proj$)"), S::kNvfp4},
             {LayerRule(R"(linear_attn\.(in_proj_qkv|in_proj_z|in_proj_a|in_proj_b|out_proj)$)"), S::kNvfp4}};
  } else if (name == "fp8") {
    rules = {{LayerRule(R"(mlp\.(gate|up|down)_proj$)"), S::kFp8},
             {LayerRule(R"(self_attn\.(q|k|v|o)_proj$)"), S::kFp8},
             {LayerRule(R"(linear_attn\.(in_proj_qkv|in_proj_z|in_proj_a|in_proj_b|out_proj)$)"), S::kFp8}};
  } else if (name != "bf16") {
    std::string known;
    for (const std::string& n : BuiltInNames()) known += (known.empty() ? "" : ", ") + n;
    return absl::InvalidArgumentError(
        fmt::format("unknown recipe \"{}\" (built-in: {}; or a path to a JSON recipe)", std::string(name), known));
  }
  return Make(std::string(name), std::move(rules));
}

absl::StatusOr<Recipe> Recipe::FromJson(std::string_view json_text, std::string_view source) {
  using nlohmann::ordered_json;
  const std::string src(source);
  ordered_json j = ordered_json::parse(json_text, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(fmt::format("{}: not valid JSON", src));
  if (!j.is_object()) return absl::InvalidArgumentError(fmt::format("{}: expected a JSON object", src));
  std::vector<RecipeRule> rules;
  std::vector<RecipeRule> base_rules;
  for (const auto& [key, value] : j.items()) {
    if (key == "base") {
      if (!value.is_string()) return absl::InvalidArgumentError(fmt::format("{}: \"base\" must be a string", src));
      auto base = BuiltIn(value.get<std::string>());
      if (!base.ok()) return core::Annotate(base.status(), fmt::format("{}: \"base\"", src));
      base_rules = base->rules();
    } else if (key == "rules") {
      if (!value.is_object())
        return absl::InvalidArgumentError(fmt::format("{}: \"rules\" must be an object of target -> scheme", src));
      for (const auto& [target, scheme] : value.items()) {
        if (!scheme.is_string())
          return absl::InvalidArgumentError(fmt::format("{}: rule \"{}\": the scheme must be a string", src, target));
        auto s = ParseWeightScheme(scheme.get<std::string>());
        if (!s.ok()) return core::Annotate(s.status(), fmt::format("{}: rule \"{}\"", src, target));
        if (target.empty()) return absl::InvalidArgumentError(fmt::format("{}: empty rule target", src));
        rules.push_back({target, *s});
      }
    } else {
      return absl::InvalidArgumentError(
          fmt::format("{}: unknown recipe key \"{}\" (known keys: base, rules)", src, key));
    }
  }
  rules.insert(rules.end(), base_rules.begin(), base_rules.end());
  auto made = Make(src, std::move(rules));
  if (!made.ok()) return core::Annotate(made.status(), src);
  return made;
}

absl::StatusOr<Recipe> Recipe::Load(const std::string& name_or_path) {
  for (const std::string& n : BuiltInNames()) {
    if (n == name_or_path) return BuiltIn(n);
  }
  if (name_or_path.size() < 5 || name_or_path.substr(name_or_path.size() - 5) != ".json") return BuiltIn(name_or_path);
  std::ifstream in(name_or_path);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open recipe file", name_or_path));
  std::stringstream ss;
  ss << in.rdbuf();
  return FromJson(ss.str(), name_or_path);
}

WeightScheme Recipe::SchemeFor(std::string_view module) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const RecipeRule& r = rules_[i];
    const bool hit = r.target.rfind("re:", 0) == 0 ? matcher_->Matches(i, module) : r.target == module;
    if (hit) return r.scheme;
  }
  return WeightScheme::kDense;
}

}  // namespace sparkserve::quant
