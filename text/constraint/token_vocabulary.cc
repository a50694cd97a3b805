// TokenVocabulary: token bytes, their sorted order and shared prefixes.
#include "text/constraint/token_vocabulary.h"

#include <algorithm>

#include "text/tokenizer/tokenizer.h"

namespace sparkserve::text::constraint {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::Create(std::vector<std::string> token_bytes, int32_t vocab_size) {
  auto v = std::shared_ptr<TokenVocabulary>(new TokenVocabulary());
  v->vocab_size_ = vocab_size;
  v->offsets_.reserve(static_cast<size_t>(vocab_size) + 1);
  v->offsets_.push_back(0);
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (length, bytes) of every id
  auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 1099511628211ull;
  };
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string empty;
    const std::string& b = static_cast<size_t>(id) < token_bytes.size() ? token_bytes[static_cast<size_t>(id)] : empty;
    v->data_ += b;
    v->offsets_.push_back(static_cast<uint32_t>(v->data_.size()));
    for (int shift = 0; shift < 32; shift += 8) mix(static_cast<uint8_t>(b.size() >> shift));
    for (unsigned char c : b) mix(c);
    if (!b.empty()) v->sorted_.push_back(id);
    v->max_token_bytes_ = std::max(v->max_token_bytes_, static_cast<int32_t>(b.size()));
  }
  v->fingerprint_ = h;
  std::sort(v->sorted_.begin(), v->sorted_.end(), [&](int32_t a, int32_t b) {
    const std::string_view x = v->bytes(a), y = v->bytes(b);
    return x != y ? x < y : a < b;
  });
  v->lcp_.assign(v->sorted_.size(), 0);
  for (size_t i = 1; i < v->sorted_.size(); ++i) {
    const std::string_view x = v->bytes(v->sorted_[i - 1]), y = v->bytes(v->sorted_[i]);
    size_t k = 0;
    while (k < x.size() && k < y.size() && x[k] == y[k]) ++k;
    v->lcp_[i] = static_cast<int32_t>(k);
  }
  return v;
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tokenizer, int32_t vocab_size) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  for (int32_t id = 0; id < vocab_size; ++id) {
    if (tokenizer.IsSpecial(id)) continue;
    if (const std::string* b = tokenizer.TokenBytes(id)) bytes[static_cast<size_t>(id)] = *b;
  }
  return Create(std::move(bytes), vocab_size);
}

}  // namespace sparkserve::text::constraint
