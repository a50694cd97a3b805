// Byte-level BPE: vocabulary/merges loading, the merge loops and the pre-token cache (see bpe_model.h).
#include "text/tokenizer/bpe_model.h"

#include <functional>
#include <limits>
#include <queue>

#include "fmt/format.h"
#include "text/tokenizer/byte_level.h"
#include "nlohmann/json.hpp"

namespace sparkserve::text {
namespace {

constexpr uint32_t kNoMerge = std::numeric_limits<uint32_t>::max();
// Words up to this many symbols use the linear lowest-rank scan; longer ones the heap.
constexpr size_t kLinearMergeMaxSymbols = 128;

absl::Status CheckEmptyString(const nlohmann::json& model, const char* key) {
  if (!model.contains(key) || model[key].is_null()) return absl::OkStatus();
  if (!model[key].is_string()) return absl::InvalidArgumentError(fmt::format("model.{}: expected a string", key));
  if (!model[key].get<std::string>().empty()) {
    return absl::UnimplementedError(
        fmt::format("BPE model with {} \"{}\" is not supported (byte-level BPE only)", key,
                    model[key].get<std::string>()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model) {
  if (!model.is_object()) return absl::InvalidArgumentError("tokenizer.json: \"model\" must be an object");
  if (model.contains("type") && model["type"].is_string() && model["type"].get<std::string>() != "BPE") {
    return absl::UnimplementedError(fmt::format(
        "unsupported model type \"{}\" (supported: BPE)", model["type"].get<std::string>()));
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return absl::InvalidArgumentError("BPE model: \"vocab\" must be an object of token -> id");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return absl::InvalidArgumentError("BPE model: \"merges\" must be a list");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    return absl::UnimplementedError("BPE dropout is not supported (encoding would not be deterministic)");
  }
  if (model.value("byte_fallback", false)) {
    return absl::UnimplementedError("BPE byte_fallback is not supported (byte-level BPE only)");
  }
  if (absl::Status s = CheckEmptyString(model, "continuing_subword_prefix"); !s.ok()) return s;
  if (absl::Status s = CheckEmptyString(model, "end_of_word_suffix"); !s.ok()) return s;

  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->fuse_unk_ = model.value("fuse_unk", false);
  m->ignore_merges_ = model.value("ignore_merges", false);
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();

  const auto& vocab = model["vocab"];
  m->vocab_.reserve(vocab.size());
  if (m->ignore_merges_) m->raw_vocab_.reserve(vocab.size());
  TokenId max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > std::numeric_limits<TokenId>::max()) {
      return absl::InvalidArgumentError(fmt::format("BPE vocab: bad id for token \"{}\"", it.key()));
    }
    const auto id = static_cast<TokenId>(it.value().get<int64_t>());
    m->vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  m->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  m->id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : m->vocab_) {
    m->id_to_token_[static_cast<size_t>(id)] = token;
    m->id_present_[static_cast<size_t>(id)] = true;
    if (!m->ignore_merges_) continue;
    if (auto raw = alphabet.ToBytes(token)) m->raw_vocab_.emplace(std::move(*raw), id);
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    const char32_t c = alphabet.CharForByte(static_cast<uint8_t>(b));
    // Alphabet code points are below U+0800: one or two UTF-8 bytes.
    if (c < 0x80) {
      ch.push_back(static_cast<char>(c));
    } else {
      ch.push_back(static_cast<char>(0xC0 | (c >> 6)));
      ch.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
    auto it = m->vocab_.find(ch);
    m->byte_id_[static_cast<size_t>(b)] = it == m->vocab_.end() ? -1 : it->second;
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const std::string unk = model["unk_token"].get<std::string>();
    auto it = m->vocab_.find(unk);
    if (it == m->vocab_.end()) {
      return absl::InvalidArgumentError(fmt::format("BPE unk_token \"{}\" is not in the vocab", unk));
    }
    m->unk_id_ = it->second;
  }

  const auto& merges = model["merges"];
  m->merges_.reserve(merges.size());
  uint32_t rank = 0;
  std::string a, b;
  for (const auto& entry : merges) {
    if (entry.is_string()) {
      const std::string& line = entry.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(fmt::format("BPE merge #{} \"{}\": expected \"A B\"", rank, line));
      }
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
      a = entry[0].get<std::string>();
      b = entry[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(fmt::format("BPE merge #{}: expected \"A B\" or [A, B]", rank));
    }
    auto ia = m->vocab_.find(a);
    auto ib = m->vocab_.find(b);
    auto inew = m->vocab_.find(a + b);
    if (ia == m->vocab_.end() || ib == m->vocab_.end() || inew == m->vocab_.end()) {
      return absl::InvalidArgumentError(fmt::format(
          "BPE merge #{} (\"{}\", \"{}\") uses a token missing from the vocab", rank, a, b));
    }
    // A repeated pair keeps its last rank, as in the Hugging Face loader.
    m->merges_.insert_or_assign(PairKey(ia->second, ib->second), Merge{rank, inew->second});
    ++rank;
  }
  return m;
}

std::optional<TokenId> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_present_.size() || !id_present_[static_cast<size_t>(id)]) {
    return nullptr;
  }
  return &id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::InitialSymbols(std::string_view bytes, std::vector<TokenId>& syms) const {
  syms.clear();
  bool pending_unk = false;
  for (char ch : bytes) {
    const TokenId id = byte_id_[static_cast<uint8_t>(ch)];
    if (id >= 0) {
      if (pending_unk) syms.push_back(*unk_id_);
      pending_unk = false;
      syms.push_back(id);
    } else if (unk_id_) {
      if (pending_unk && !fuse_unk_) syms.push_back(*unk_id_);
      pending_unk = true;
    }  // else: no token and no unk: the byte is dropped, as the Hugging Face BPE does
  }
  if (pending_unk) syms.push_back(*unk_id_);
}

void BpeModel::MergeLinear(std::vector<TokenId>& syms) const {
  if (syms.size() < 2) return;
  // ranks[i], new_ids[i]: the merge of the pair (syms[i], syms[i + 1]).
  std::vector<uint32_t> ranks(syms.size() - 1);
  std::vector<TokenId> new_ids(syms.size() - 1);
  auto set_pair = [&](size_t i) {
    const Merge* m = FindMerge(syms[i], syms[i + 1]);
    ranks[i] = m ? m->rank : kNoMerge;
    new_ids[i] = m ? m->new_id : -1;
  };
  for (size_t i = 0; i + 1 < syms.size(); ++i) set_pair(i);
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    syms[best] = new_ids[best];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    new_ids.erase(new_ids.begin() + static_cast<std::ptrdiff_t>(best));
    if (best < ranks.size()) set_pair(best);
    if (best > 0) set_pair(best - 1);
  }
}

void BpeModel::MergeHeap(std::vector<TokenId>& syms) const {
  const int n = static_cast<int>(syms.size());
  if (n < 2) return;
  std::vector<int> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  std::vector<bool> alive(static_cast<size_t>(n), true);
  for (int i = 0; i < n; ++i) {
    prev[static_cast<size_t>(i)] = i - 1;
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Entry {
    uint32_t rank;
    int pos;
    TokenId new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push_pair = [&](int left) {
    const int right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    if (const Merge* m = FindMerge(syms[static_cast<size_t>(left)], syms[static_cast<size_t>(right)])) {
      heap.push({m->rank, left, m->new_id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const auto pos = static_cast<size_t>(top.pos);
    if (!alive[pos] || next[pos] < 0) continue;
    const auto right = static_cast<size_t>(next[pos]);
    const Merge* m = FindMerge(syms[pos], syms[right]);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    syms[pos] = m->new_id;
    alive[right] = false;
    next[pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = top.pos;
    if (prev[pos] >= 0) push_pair(prev[pos]);
    push_pair(top.pos);
  }
  size_t w = 0;
  for (int i = 0; i >= 0; i = next[static_cast<size_t>(i)]) syms[w++] = syms[static_cast<size_t>(i)];
  syms.resize(w);
}

void BpeModel::EncodeWordUncached(std::string_view bytes, bool use_heap, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    auto it = raw_vocab_.find(absl::string_view(bytes.data(), bytes.size()));
    if (it != raw_vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<TokenId> syms;
  InitialSymbols(bytes, syms);
  if (use_heap) {
    MergeHeap(syms);
  } else {
    MergeLinear(syms);
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

void BpeModel::EncodeWord(std::string_view bytes, std::vector<TokenId>& out) const {
  if (bytes.size() == 1) {
    const TokenId id = byte_id_[static_cast<uint8_t>(bytes[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_) {
      out.push_back(*unk_id_);
    }
    return;
  }
  if (bytes.size() > kMaxCachedWordBytes) {
    EncodeWordUncached(bytes, bytes.size() > kLinearMergeMaxSymbols, out);
    return;
  }
  const absl::string_view key(bytes.data(), bytes.size());
  CacheShard& shard = cache_[std::hash<std::string_view>{}(bytes) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  EncodeWordUncached(bytes, bytes.size() > kLinearMergeMaxSymbols, out);
  std::vector<TokenId> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kCacheShardCapacity) shard.map.clear();  // bounded: start over
  shard.map.emplace(std::string(bytes), std::move(ids));
}

void BpeModel::ClearCache() const {
  for (size_t i = 0; i < kCacheShards; ++i) {
    std::lock_guard<std::mutex> lock(cache_[i].mu);
    cache_[i].map.clear();
  }
}

}  // namespace sparkserve::text
