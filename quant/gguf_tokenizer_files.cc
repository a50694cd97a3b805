// tokenizer.ggml.* -> tokenizer.json, tokenizer_config.json, generation_config.json (see the header).
#include "quant/gguf_tokenizer_files.h"

#include <map>
#include <set>

#include "core/status.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace sparkserve::quant {
namespace {

using nlohmann::ordered_json;

// llama.cpp's token types.
constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The split regexes of the pre-tokenizers llama.cpp names (Qwen2/Qwen3, and Qwen3.5 which adds \p{M}).
const std::map<std::string, std::string>& SplitRegexes() {
  static const auto* m = new std::map<std::string, std::string>{
      {"qwen2", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
      {"qwen35", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
  };
  return *m;
}

absl::StatusOr<const GgufValue*> Array(const GgufFile& f, const std::string& key, GgufValueType elem) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return absl::InvalidArgumentError(fmt::format("{}: metadata '{}' is missing", f.path(), key));
  if (v->type != GgufValueType::kArray || (!v->array.empty() && v->elem_type != elem)) {
    return absl::InvalidArgumentError(fmt::format("{}: metadata '{}' has the wrong type", f.path(), key));
  }
  return v;
}

std::optional<int64_t> Id(const GgufFile& f, const std::string& key, size_t n_tokens) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return std::nullopt;
  absl::StatusOr<int64_t> x = v->AsInt();
  if (!x.ok() || *x < 0 || static_cast<size_t>(*x) >= n_tokens) return std::nullopt;
  return *x;
}

}  // namespace

absl::StatusOr<GgufTokenizerFiles> BuildGgufTokenizerFiles(const GgufFile& f) {
  const GgufValue* model = f.Find("tokenizer.ggml.model");
  if (model == nullptr || model->s != "gpt2") {
    return absl::UnimplementedError(fmt::format("{}: tokenizer.ggml.model '{}' (only gpt2, byte-level BPE, is read)", f.path(),
                                                model ? model->s : std::string("(missing)")));
  }
  const GgufValue* pre = f.Find("tokenizer.ggml.pre");
  const std::string pre_name = pre ? pre->s : "(missing)";
  const auto regex = SplitRegexes().find(pre_name);
  const bool gpt2 = pre_name == "gpt-2";  // the ByteLevel pre-tokenizer's own regex, no normalizer
  if (regex == SplitRegexes().end() && !gpt2) {
    return absl::UnimplementedError(fmt::format("{}: tokenizer.ggml.pre '{}' (qwen2, qwen35 and gpt-2 are read)", f.path(), pre_name));
  }
  ASSIGN_OR_RETURN(const GgufValue* tokens, Array(f, "tokenizer.ggml.tokens", GgufValueType::kString));
  ASSIGN_OR_RETURN(const GgufValue* merges, Array(f, "tokenizer.ggml.merges", GgufValueType::kString));
  const GgufValue* types = f.Find("tokenizer.ggml.token_type");
  if (types != nullptr && (types->type != GgufValueType::kArray || types->array.size() != tokens->array.size())) {
    return absl::InvalidArgumentError(fmt::format("{}: tokenizer.ggml.token_type does not match the tokens", f.path()));
  }
  const size_t n = tokens->array.size();
  nlohmann::json vocab = nlohmann::json::object();  // a std::map: ordered_json's inserts are linear
  ordered_json added = ordered_json::array();
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = tokens->array[i].s;
    int64_t type = kNormal;
    if (types != nullptr) {
      absl::StatusOr<int64_t> t = types->array[i].AsInt();
      if (!t.ok()) return absl::InvalidArgumentError(fmt::format("{}: tokenizer.ggml.token_type[{}] is not an integer", f.path(), i));
      type = *t;
    }
    if (type == kUnused) continue;
    if (!seen.insert(s).second) return absl::InvalidArgumentError(fmt::format("{}: token '{}' appears twice", f.path(), s));
    // Added tokens stay in the vocabulary too (a tokenizer trained with its specials has them there;
    // elsewhere no merge makes them, so it changes no encoding).
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", i}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    }
    vocab[s] = i;
  }
  ordered_json merge_list = ordered_json::array();
  for (const GgufValue& m : merges->array) {
    const size_t sp = m.s.find(' ');
    if (sp == std::string::npos || m.s.find(' ', sp + 1) != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("{}: merge '{}' is not two tokens", f.path(), m.s));
    }
    merge_list.push_back({m.s.substr(0, sp), m.s.substr(sp + 1)});
  }
  const ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ordered_json tj;
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  if (gpt2) {
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  } else {
    tj["normalizer"] = {{"type", "NFC"}};
    tj["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", regex->second}}}, {"behavior", "Isolated"}, {"invert", false}},
                                              byte_level}}};
  }
  tj["post_processor"] = byte_level;
  tj["decoder"] = byte_level;
  tj["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                 {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                 {"vocab", vocab}, {"merges", merge_list}};

  GgufTokenizerFiles out;
  out.tokenizer_json = tj.dump() + "\n";
  out.bos_id = Id(f, "tokenizer.ggml.bos_token_id", n);
  const std::optional<int64_t> eos = Id(f, "tokenizer.ggml.eos_token_id", n);
  const std::optional<int64_t> eot = Id(f, "tokenizer.ggml.eot_token_id", n);
  const std::optional<int64_t> pad = Id(f, "tokenizer.ggml.padding_token_id", n);
  if (eos) out.eos_ids.push_back(*eos);
  if (eot && eot != eos) out.eos_ids.push_back(*eot);
  ordered_json tc;
  const GgufValue* add_bos = f.Find("tokenizer.ggml.add_bos_token");
  tc["add_bos_token"] = add_bos != nullptr && add_bos->i != 0;
  tc["bos_token"] = out.bos_id ? ordered_json(tokens->array[*out.bos_id].s) : ordered_json(nullptr);
  tc["eos_token"] = eos ? ordered_json(tokens->array[*eos].s) : ordered_json(nullptr);
  tc["pad_token"] = pad ? ordered_json(tokens->array[*pad].s) : ordered_json(nullptr);
  if (const GgufValue* t = f.Find("tokenizer.chat_template"); t != nullptr && t->type == GgufValueType::kString) {
    tc["chat_template"] = t->s;
  }
  out.tokenizer_config_json = tc.dump(2) + "\n";
  ordered_json gen = ordered_json::object();
  if (out.bos_id) gen["bos_token_id"] = *out.bos_id;
  if (!out.eos_ids.empty()) gen["eos_token_id"] = out.eos_ids;
  out.generation_config_json = gen.dump(2) + "\n";
  return out;
}

}  // namespace sparkserve::quant
