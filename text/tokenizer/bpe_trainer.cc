// BpeTrainer: byte-level BPE merge learning (see bpe_trainer.h).
#include "text/tokenizer/bpe_trainer.h"

#include <cctype>
#include <map>
#include <string>

#include "text/tokenizer/byte_level.h"

namespace sparkserve::text {
namespace {

enum class CharClass { kLetter, kDigit, kSpace, kNewline, kOther };
CharClass Classify(unsigned char c) {
  if (c >= 0x80 || std::isalpha(c)) return CharClass::kLetter;  // non-ASCII bytes count as letters
  if (std::isdigit(c)) return CharClass::kDigit;
  if (c == '\n' || c == '\r') return CharClass::kNewline;
  if (std::isspace(c)) return CharClass::kSpace;
  return CharClass::kOther;
}

// A simplified Qwen2 pre-tokenizer for training only: " word", single digits, " punct+", spaces,
// newlines. (Merges learnt across slightly different boundaries are still valid merges.)
std::vector<std::string> PreTokenize(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    const auto c = static_cast<unsigned char>(text[i]);
    const CharClass k = Classify(c);
    if (k == CharClass::kDigit) {
      j = i + 1;
    } else if (k == CharClass::kNewline) {
      while (j < text.size() && Classify(static_cast<unsigned char>(text[j])) == CharClass::kNewline) ++j;
    } else {
      if (c == ' ' && i + 1 < text.size()) {
        const CharClass n = Classify(static_cast<unsigned char>(text[i + 1]));
        if (n == CharClass::kLetter || n == CharClass::kOther) j = i + 1;
      }
      const CharClass run = j < text.size() ? Classify(static_cast<unsigned char>(text[j])) : k;
      if (run == CharClass::kSpace) {
        while (j < text.size() && Classify(static_cast<unsigned char>(text[j])) == CharClass::kSpace) ++j;
      } else {
        while (j < text.size() && Classify(static_cast<unsigned char>(text[j])) == run) ++j;
      }
      if (j == i) j = i + 1;
    }
    out.emplace_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

TrainedBpe TrainByteLevelBpe(std::string_view corpus, int max_merges) {
  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::Get();
  std::vector<std::string> sym(256);
  for (int b = 0; b < 256; ++b) sym[static_cast<size_t>(b)] = alphabet.FromBytes(std::string(1, static_cast<char>(b)));
  // Words as symbol sequences, with their counts.
  std::map<std::string, int> word_counts;
  for (const std::string& w : PreTokenize(corpus)) ++word_counts[w];
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : word_counts) {
    std::vector<std::string> s;
    for (unsigned char c : w) s.push_back(sym[c]);
    words.emplace_back(std::move(s), n);
  }
  TrainedBpe out;
  out.vocab = sym;
  std::map<std::string, bool> known;  // symbols already in the vocabulary
  for (const std::string& v : sym) known[v] = true;
  for (int m = 0; m < max_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [s, n] : words) {
      for (size_t i = 0; i + 1 < s.size(); ++i) pairs[{s[i], s[i + 1]}] += n;
    }
    // Most frequent pair; ties go to the smallest pair (std::map order), so training is deterministic.
    const std::pair<std::string, std::string>* best = nullptr;
    int best_n = 1;
    for (const auto& [p, n] : pairs) {
      if (n > best_n) {
        best_n = n;
        best = &p;
      }
    }
    if (best == nullptr) break;
    const auto [a, b] = *best;
    const std::string ab = a + b;
    out.merges.emplace_back(a, b);
    if (!known[ab]) {
      known[ab] = true;
      out.vocab.push_back(ab);
    }
    for (auto& [s, n] : words) {
      std::vector<std::string> t;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          t.push_back(ab);
          ++i;
        } else {
          t.push_back(s[i]);
        }
      }
      s = std::move(t);
    }
  }
  return out;
}

}  // namespace sparkserve::text
