// Tokenizer loading (tokenizer.json components) and the encode/decode pipelines (see tokenizer.h).
#include "text/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"
#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/utf8.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace sparkserve::text {
namespace {

using Json = nlohmann::json;

absl::Status CheckDecoder(const Json& j) {
  if (j.is_null()) {
    return absl::UnimplementedError("tokenizer.json has no decoder (a ByteLevel decoder is required)");
  }
  const std::string type = j.is_object() ? j.value("type", "") : "";
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array() && !j["decoders"].empty()) {
    for (const auto& d : j["decoders"]) {
      if (!d.is_object() || d.value("type", "") != "ByteLevel") {
        return absl::UnimplementedError(fmt::format("unsupported decoder \"{}\" in decoder Sequence (supported: ByteLevel)",
                                                    d.is_object() ? d.value("type", "?") : d.dump()));
      }
    }
    return absl::OkStatus();
  }
  return absl::UnimplementedError(fmt::format("unsupported decoder type \"{}\" (supported: ByteLevel)", type));
}

// Resolves a special token name of a post-processor to its id.
absl::StatusOr<TokenId> PairId(const Json& pair, const char* what) {
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    return absl::InvalidArgumentError(fmt::format("post_processor: \"{}\" must be [token, id]", what));
  }
  return pair[1].get<TokenId>();
}

// Adds the ids the post-processor puts around a single sequence (add_special_tokens = true).
absl::Status AddPostProcessor(const Json& j, std::vector<TokenId>& prefix, std::vector<TokenId>& suffix) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = j.is_object() ? j.value("type", "") : "";
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) {
      return absl::InvalidArgumentError("post_processor Sequence: missing \"processors\" list");
    }
    for (const auto& p : j["processors"]) {
      if (absl::Status s = AddPostProcessor(p, prefix, suffix); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    auto cls = PairId(j.contains("cls") ? j["cls"] : Json(), "cls");
    if (!cls.ok()) return cls.status();
    auto sep = PairId(j.contains("sep") ? j["sep"] : Json(), "sep");
    if (!sep.ok()) return sep.status();
    prefix.insert(prefix.begin(), *cls);
    suffix.push_back(*sep);
    return absl::OkStatus();
  }
  if (type == "TemplateProcessing") {
    if (!j.contains("single") || !j["single"].is_array()) {
      return absl::InvalidArgumentError("TemplateProcessing: missing \"single\" template");
    }
    const Json& specials = j.contains("special_tokens") ? j["special_tokens"] : Json::object();
    std::vector<TokenId> before, after;
    bool seen_sequence = false;
    for (const auto& item : j["single"]) {
      if (item.contains("Sequence")) {
        if (seen_sequence) return absl::InvalidArgumentError("TemplateProcessing: \"single\" names the sequence twice");
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id")) {
        return absl::InvalidArgumentError(fmt::format("TemplateProcessing: bad template item {}", item.dump()));
      }
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array()) {
        return absl::InvalidArgumentError(fmt::format("TemplateProcessing: special token \"{}\" has no ids", name));
      }
      auto& dst = seen_sequence ? after : before;
      for (const auto& id : specials[name]["ids"]) dst.push_back(id.get<TokenId>());
    }
    prefix.insert(prefix.begin(), before.begin(), before.end());
    suffix.insert(suffix.end(), after.begin(), after.end());
    return absl::OkStatus();
  }
  return absl::UnimplementedError(fmt::format(
      "unsupported post_processor type \"{}\" (supported: ByteLevel, TemplateProcessing, RobertaProcessing, "
      "BertProcessing, Sequence)", type));
}

absl::StatusOr<AddedToken> ParseAddedToken(const Json& j) {
  if (!j.is_object() || !j.contains("content") || !j["content"].is_string()) {
    return absl::InvalidArgumentError(fmt::format("added_tokens: bad entry {}", j.dump()));
  }
  AddedToken t;
  t.content = j["content"].get<std::string>();
  t.special = j.value("special", false);
  t.normalized = j.value("normalized", !t.special);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.single_word = j.value("single_word", false);
  t.id = j.contains("id") && j["id"].is_number_integer() ? j["id"].get<uint32_t>() : 0;
  return t;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "tokenizer.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open {}", p.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  auto tok = FromJsonText(buf.str());
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), fmt::format("{}: {}", p.string(), std::string(tok.status().message())));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonText(std::string_view json_text) {
  Json j = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return FromJson(j);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(const Json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("tokenizer.json must hold an object");
  auto tok = std::unique_ptr<Tokenizer>(new Tokenizer());
  if (!j.contains("model")) return absl::InvalidArgumentError("tokenizer.json has no \"model\"");
  auto model = BpeModel::FromJson(j["model"]);
  if (!model.ok()) return model.status();
  tok->model_ = std::move(*model);
  auto normalizer = Normalizer::FromJson(j.contains("normalizer") ? j["normalizer"] : Json());
  if (!normalizer.ok()) return normalizer.status();
  tok->normalizer_ = std::move(*normalizer);
  auto pre = PreTokenizer::FromJson(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : Json());
  if (!pre.ok()) return pre.status();
  tok->pre_tokenizer_ = std::move(*pre);
  if (absl::Status s = CheckDecoder(j.contains("decoder") ? j["decoder"] : Json()); !s.ok()) return s;
  if (absl::Status s = AddPostProcessor(j.contains("post_processor") ? j["post_processor"] : Json(),
                                        tok->prefix_ids_, tok->suffix_ids_);
      !s.ok()) {
    return s;
  }
  for (const char* key : {"truncation", "padding"}) {
    if (j.contains(key) && !j[key].is_null()) {
      spdlog::warn("tokenizer.json: \"{}\" is set and ignored (prompts are never truncated or padded here)", key);
    }
  }

  // Added tokens get their ids the way the HF loader assigns them: an existing token (added or in
  // the vocab) keeps its id, a new one takes the next id after the vocab / previous added tokens.
  absl::flat_hash_map<std::string, size_t> added_index;  // content -> index in added_tokens_
  const Json& added = j.contains("added_tokens") ? j["added_tokens"] : Json::array();
  if (!added.is_array()) return absl::InvalidArgumentError("\"added_tokens\" must be a list");
  int64_t max_added = -1;
  const auto model_vocab_size = static_cast<int64_t>(tok->model_->vocab_size());
  for (const auto& entry : added) {
    auto t = ParseAddedToken(entry);
    if (!t.ok()) return t.status();
    if (t->content.empty()) continue;
    const uint32_t file_id = t->id;
    if (auto it = added_index.find(t->content); it != added_index.end()) {
      t->id = tok->added_tokens_[it->second].id;
      tok->added_tokens_[it->second] = *t;  // same content again: the later flags win
      continue;
    }
    if (auto id = tok->model_->TokenToId(t->content)) {
      t->id = static_cast<uint32_t>(*id);
    } else {
      t->id = static_cast<uint32_t>(max_added >= model_vocab_size || model_vocab_size == 0
                                        ? max_added + 1 : model_vocab_size);
    }
    if (t->id != file_id) {
      spdlog::warn("tokenizer.json: added token \"{}\" has id {} in the file but gets id {}", t->content,
                   file_id, t->id);
    }
    max_added = std::max<int64_t>(max_added, t->id);
    added_index.emplace(t->content, tok->added_tokens_.size());
    tok->added_tokens_.push_back(*t);
  }
  // Matching groups: special tokens first, then the others (the HF trie order).
  std::vector<AddedToken> raw_group, normalized_group;
  for (bool special : {true, false}) {
    for (const AddedToken& t : tok->added_tokens_) {
      if (t.special != special) continue;
      if (!t.normalized) {
        raw_group.push_back(t);
        continue;
      }
      AddedToken n = t;
      if (!tok->normalizer_.Apply(t.content, n.content)) {
        return absl::InvalidArgumentError(fmt::format("added token \"{}\" cannot be normalized", t.content));
      }
      normalized_group.push_back(std::move(n));
    }
  }
  for (const AddedToken& t : tok->added_tokens_) tok->added_ids_[t.content] = static_cast<TokenId>(t.id);
  tok->raw_added_ = AddedTokenMatcher(std::move(raw_group));
  tok->normalized_added_ = AddedTokenMatcher(std::move(normalized_group));

  // Decoding tables: each id's bytes (ByteLevel decoder: the alphabet's bytes when every character
  // is in it, else the token's own UTF-8), and whether it is special.
  size_t id_space = static_cast<size_t>(tok->model_->max_id() + 1);
  for (const AddedToken& t : tok->added_tokens_) id_space = std::max<size_t>(id_space, t.id + 1);
  tok->decode_bytes_.assign(id_space, std::string());
  tok->known_.assign(id_space, false);
  tok->special_.assign(id_space, false);
  absl::flat_hash_set<std::string> special_contents;
  for (const AddedToken& t : tok->added_tokens_) {
    if (t.special) special_contents.insert(t.content);
  }
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  auto set_id = [&](TokenId id, const std::string& content) {
    const auto i = static_cast<size_t>(id);
    auto raw = alphabet.ToBytes(content);
    tok->decode_bytes_[i] = raw ? std::move(*raw) : content;
    tok->known_[i] = true;
    tok->special_[i] = special_contents.contains(content);
  };
  for (TokenId id = 0; id <= tok->model_->max_id(); ++id) {
    if (const std::string* s = tok->model_->IdToToken(id)) set_id(id, *s);
  }
  for (const AddedToken& t : tok->added_tokens_) set_id(static_cast<TokenId>(t.id), t.content);
  return tok;
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  const size_t valid = ValidUtf8PrefixLength(text);
  if (valid != text.size()) {
    return absl::InvalidArgumentError(fmt::format("input is not valid UTF-8 (bad byte 0x{:02X} at offset {})",
                                                  static_cast<uint8_t>(text[valid]), valid));
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  std::vector<TextSegment> segments;
  raw_added_.Split(text, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0) {
      ids.push_back(static_cast<TokenId>(seg.token_id));
      continue;
    }
    if (absl::Status s = EncodeGap(text.substr(seg.begin, seg.end - seg.begin), ids); !s.ok()) return s;
  }
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

absl::Status Tokenizer::EncodeGap(std::string_view text, std::vector<TokenId>& out) const {
  std::string normalized;
  std::string_view view = text;
  if (!normalizer_.is_identity()) {
    if (!normalizer_.Apply(text, normalized)) return absl::InternalError("normalization failed");
    view = normalized;
  }
  if (normalized_added_.empty()) return EncodeNormalized(view, out);
  std::vector<TextSegment> segments;
  normalized_added_.Split(view, segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id >= 0) {
      out.push_back(static_cast<TokenId>(seg.token_id));
      continue;
    }
    if (absl::Status s = EncodeNormalized(view.substr(seg.begin, seg.end - seg.begin), out); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodeNormalized(std::string_view text, std::vector<TokenId>& out) const {
  return pre_tokenizer_->Run(text, [&](std::string_view word) { model_->EncodeWord(word, out); });
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (TokenId id : ids) {
    const std::string* b = TokenBytes(id);
    if (b == nullptr || (skip_special_tokens && IsSpecial(id))) continue;
    bytes.append(*b);
  }
  return Utf8Lossy(bytes);
}

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  if (auto it = added_ids_.find(absl::string_view(token.data(), token.size())); it != added_ids_.end()) {
    return it->second;
  }
  return model_->TokenToId(token);
}

std::optional<std::string> Tokenizer::IdToToken(TokenId id) const {
  // An added token with a vocab id has the vocab string as content: the model answers for it.
  if (const std::string* s = model_->IdToToken(id)) return *s;
  for (const AddedToken& t : added_tokens_) {
    if (static_cast<TokenId>(t.id) == id) return t.content;
  }
  return std::nullopt;
}

}  // namespace sparkserve::text
