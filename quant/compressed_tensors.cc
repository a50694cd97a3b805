// compressed-tensors quantization_config parsing and target matching (see compressed_tensors.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "quant/compressed_tensors.h"

#include <pcre2.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {

// ordered_json: config_groups keep their file order (it decides which group owns a shared target).
using json = nlohmann::ordered_json;

// Compiled `re:` patterns of every target and ignore entry.
class TargetMatcher {
 public:
  ~TargetMatcher() {
    for (auto& [_, code] : compiled_) pcre2_code_free(code);
  }
  // Compiles `pattern` (without "re:") once.
  absl::Status Add(const std::string& pattern, std::string_view source) {
    if (compiled_.count(pattern)) return absl::OkStatus();
    int err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return absl::InvalidArgumentError(fmt::format("{}: invalid regex 're:{}' at offset {}: {}", source, pattern,
                                                    offset, reinterpret_cast<const char*>(msg)));
    }
    compiled_.emplace(pattern, code);
    return absl::OkStatus();
  }
  // Python re.match: the pattern must match a prefix of `name` (anchored at the start only).
  bool Match(const std::string& pattern, std::string_view name) const {
    const auto it = compiled_.find(pattern);
    if (it == compiled_.end()) return false;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(it->second, nullptr);
    const int rc = pcre2_match(it->second, reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0,
                               PCRE2_ANCHORED, md, nullptr);
    pcre2_match_data_free(md);
    return rc >= 0;
  }

 private:
  std::map<std::string, pcre2_code*> compiled_;
};

namespace {

constexpr std::string_view kRe = "re:";

bool StartsWithRe(std::string_view t) { return t.substr(0, 3) == kRe; }

// match_name: "re:" targets by regex, others by equality.
bool MatchName(const TargetMatcher& m, std::string_view name, const std::string& target) {
  if (StartsWithRe(target)) return m.Match(target.substr(3), name);
  return target == name;
}

// _match_class: the module's class or any torch base class (every module is a "Module").
bool MatchClass(std::string_view class_name, const std::string& target) {
  return target == class_name || target == "Module";
}

absl::StatusOr<QuantArgs> ParseArgs(const json& j, const std::string& where) {
  auto bad = [&](const std::string& what) { return absl::InvalidArgumentError(fmt::format("{}: {}", where, what)); };
  if (!j.is_object()) return bad("is not an object");
  QuantArgs a;
  try {
    if (j.contains("num_bits")) a.num_bits = j.at("num_bits").get<int>();
    if (j.contains("type")) a.type = j.at("type").get<std::string>();
    if (j.contains("symmetric") && !j.at("symmetric").is_null()) a.symmetric = j.at("symmetric").get<bool>();
    if (j.contains("group_size") && !j.at("group_size").is_null()) a.group_size = j.at("group_size").get<int>();
    if (j.contains("strategy") && !j.at("strategy").is_null()) a.strategy = j.at("strategy").get<std::string>();
    if (j.contains("block_structure") && !j.at("block_structure").is_null()) {
      a.block_structure = j.at("block_structure").get<std::vector<int>>();
    }
    if (j.contains("dynamic") && !j.at("dynamic").is_null()) {
      const json& d = j.at("dynamic");
      a.dynamic = d.is_boolean() ? (d.get<bool>() ? "true" : "false") : d.get<std::string>();
    }
    if (j.contains("scale_dtype") && !j.at("scale_dtype").is_null()) {
      a.scale_dtype = j.at("scale_dtype").get<std::string>();
      if (a.scale_dtype.rfind("torch.", 0) == 0) a.scale_dtype = a.scale_dtype.substr(6);
    }
  } catch (const json::exception& e) {
    return bad(fmt::format("malformed quantization args: {}", e.what()));
  }
  if (a.type != "int" && a.type != "float") return bad(fmt::format("unknown type '{}'", a.type));
  if (a.dynamic != "true" && a.dynamic != "false" && a.dynamic != "local") {
    return bad(fmt::format("unknown dynamic '{}'", a.dynamic));
  }
  // Strategy inference and checks as QuantizationArgs.validate_model_after.
  if (a.strategy.empty()) {
    if (!a.group_size) a.strategy = "tensor";
    else if (*a.group_size > 0) a.strategy = "group";
    else if (*a.group_size == -1) a.strategy = "channel";
    else return bad(fmt::format("invalid group_size {}", *a.group_size));
  }
  static const char* kStrategies[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
  if (std::find(std::begin(kStrategies), std::end(kStrategies), a.strategy) == std::end(kStrategies)) {
    return bad(fmt::format("unknown strategy '{}'", a.strategy));
  }
  const bool grouped = a.strategy == "group" || a.strategy == "tensor_group";
  if (grouped && (!a.group_size || *a.group_size <= 0)) {
    return bad(fmt::format("strategy '{}' needs a positive group_size", a.strategy));
  }
  if (a.group_size && *a.group_size > 0 && !grouped) return bad("group_size needs strategy 'group' or 'tensor_group'");
  if ((a.strategy == "block") != !a.block_structure.empty()) {
    return bad("block strategy and block_structure go together");
  }
  if (!a.block_structure.empty() &&
      (a.block_structure.size() != 2 || a.block_structure[0] <= 0 || a.block_structure[1] <= 0)) {
    return bad("block_structure must be two positive integers");
  }
  return a;
}

absl::StatusOr<QuantScheme> ParseScheme(const std::string& name, const json& j, std::string_view source) {
  const std::string where = fmt::format("{}: config_groups.{}", source, name);
  if (j.is_array()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: preset scheme references (a list of targets) are not supported; expected a full scheme", where));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(fmt::format("{}: is not an object", where));
  QuantScheme s;
  s.name = name;
  if (!j.contains("targets") || !j.at("targets").is_array()) {
    return absl::InvalidArgumentError(fmt::format("{}: missing \"targets\" list", where));
  }
  for (const json& t : j.at("targets")) {
    if (!t.is_string()) return absl::InvalidArgumentError(fmt::format("{}: a target is not a string", where));
    s.targets.push_back(t.get<std::string>());
  }
  for (const char* key : {"weights", "input_activations", "output_activations"}) {
    if (!j.contains(key) || j.at(key).is_null()) continue;
    ASSIGN_OR_RETURN(QuantArgs a, ParseArgs(j.at(key), fmt::format("{}.{}", where, key)));
    (key[0] == 'w' ? s.weights : key[0] == 'i' ? s.input_activations : s.output_activations) = std::move(a);
  }
  if (j.contains("format") && !j.at("format").is_null()) {
    if (!j.at("format").is_string()) return absl::InvalidArgumentError(fmt::format("{}: format is not a string", where));
    s.format = j.at("format").get<std::string>();
    if (s.format == kFormatMixedPrecision) {
      return absl::InvalidArgumentError(fmt::format("{}: mixed-precision cannot be a group's format", where));
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<QuantizationConfig> ParseQuantizationConfig(std::string_view json_text, std::string_view source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: quantization_config is not valid JSON: {}", source, e.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(fmt::format("{}: quantization_config is not an object", source));
  QuantizationConfig c;
  c.quant_method = j.value("quant_method", std::string());
  if (c.quant_method != "compressed-tensors") {
    return absl::InvalidArgumentError(fmt::format(
        "{}: unsupported quantization method '{}' (only compressed-tensors checkpoints are supported)", source,
        c.quant_method));
  }
  auto str = [&](const char* key) -> std::string {
    return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : std::string();
  };
  c.format = str("format");
  c.quantization_status = str("quantization_status");
  auto matcher = std::make_shared<TargetMatcher>();
  if (j.contains("config_groups") && !j.at("config_groups").is_null()) {
    if (!j.at("config_groups").is_object()) {
      return absl::InvalidArgumentError(fmt::format("{}: config_groups is not an object", source));
    }
    for (const auto& [name, g] : j.at("config_groups").items()) {
      ASSIGN_OR_RETURN(QuantScheme s, ParseScheme(name, g, source));
      c.groups.push_back(std::move(s));
    }
  }
  if (j.contains("ignore") && !j.at("ignore").is_null()) {
    if (!j.at("ignore").is_array()) return absl::InvalidArgumentError(fmt::format("{}: ignore is not a list", source));
    for (const json& t : j.at("ignore")) {
      if (!t.is_string()) return absl::InvalidArgumentError(fmt::format("{}: an ignore entry is not a string", source));
      c.ignore.push_back(t.get<std::string>());
    }
  }
  if (j.contains("kv_cache_scheme") && !j.at("kv_cache_scheme").is_null()) {
    ASSIGN_OR_RETURN(c.kv_cache_scheme, ParseArgs(j.at("kv_cache_scheme"), fmt::format("{}: kv_cache_scheme", source)));
  }
  for (const QuantScheme& s : c.groups) {
    for (const std::string& t : s.targets) {
      if (StartsWithRe(t)) RETURN_IF_ERROR(matcher->Add(t.substr(3), fmt::format("{}: config_groups.{}", source, s.name)));
    }
  }
  for (const std::string& t : c.ignore) {
    if (StartsWithRe(t)) RETURN_IF_ERROR(matcher->Add(t.substr(3), fmt::format("{}: ignore", source)));
  }
  c.matcher = std::move(matcher);
  return c;
}

absl::StatusOr<std::optional<QuantizationConfig>> ReadQuantizationConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  std::stringstream buf;
  buf << in.rdbuf();
  json j;
  try {
    j = json::parse(buf.str());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", path));
  // Multimodal configs may keep it under text_config; the top level wins.
  const json* q = nullptr;
  if (j.contains("quantization_config") && !j.at("quantization_config").is_null()) {
    q = &j.at("quantization_config");
  } else if (j.contains("text_config") && j.at("text_config").is_object() &&
             j.at("text_config").contains("quantization_config") && !j.at("text_config").at("quantization_config").is_null()) {
    q = &j.at("text_config").at("quantization_config");
  }
  if (q == nullptr) return std::optional<QuantizationConfig>();
  ASSIGN_OR_RETURN(QuantizationConfig c, ParseQuantizationConfig(q->dump(), path));
  return std::optional<QuantizationConfig>(std::move(c));
}

const QuantScheme* QuantizationConfig::SchemeFor(std::string_view name, std::string_view class_name) const {
  if (!matcher) return nullptr;
  const TargetMatcher& m = *matcher;
  // target -> group, in first-insertion order with the last group's value (Python OrderedDict).
  std::vector<std::string> targets;
  std::map<std::string, const QuantScheme*> owner;
  for (const QuantScheme& s : groups) {
    for (const std::string& t : s.targets) {
      if (owner.emplace(t, &s).second) targets.push_back(t);
      else owner[t] = &s;
    }
  }
  auto matches = [&](const std::string& t) { return MatchName(m, name, t) || MatchClass(class_name, t); };
  // match_named_modules: some target matches and no ignore entry does.
  if (std::none_of(targets.begin(), targets.end(), matches)) return nullptr;
  if (std::any_of(ignore.begin(), ignore.end(), matches)) return nullptr;
  // match_targets: sorted by ("re:" in target, target); name matches first, then class matches.
  std::vector<std::string> sorted = targets;
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) {
    const bool ra = a.find(kRe) != std::string::npos, rb = b.find(kRe) != std::string::npos;
    return ra != rb ? rb : a < b;
  });
  for (const std::string& t : sorted) {
    if (MatchName(m, name, t)) return owner[t];
  }
  for (const std::string& t : sorted) {
    if (MatchClass(class_name, t)) return owner[t];
  }
  return nullptr;
}

std::string QuantizationConfig::FormatFor(const QuantScheme& s) const {
  if (!s.format.empty()) return s.format;
  if (!format.empty() && format != kFormatMixedPrecision) return format;
  // infer_module_format, in the library's priority order.
  const auto& w = s.weights;
  if (!w) return std::string(kFormatDense);
  if (w->is_float(4) && w->group_size == 32) return "mxfp4-pack-quantized";
  if (w->is_float(6) && w->group_size == 32) return "mxfp6-pack-quantized";
  if (w->is_float(8) && w->group_size == 32 && w->scale_dtype == "uint8") return "mxfp8-quantized";
  if (w->is_float(4) && w->group_size == 16) return std::string(kFormatNvfp4);
  if (s.input_activations && w->type == "int") return "int-quantized";
  if (w->type == "int" && w->num_bits >= 1 && w->num_bits <= 8 &&
      !(s.input_activations && s.input_activations->type == "float")) {
    return "pack-quantized";
  }
  if (s.input_activations && w->type == "float") return std::string(kFormatFloatQuantized);
  return std::string(kFormatNaiveQuantized);
}

}  // namespace sparkserve::quant
