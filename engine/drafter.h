// Drafter: where a verify window's draft tokens come from. The MTP drafter is the model runner's
// MTP block (the scheduler asks for DraftWork; Propose is never called); the n-gram drafter (prompt
// lookup, as vLLM's `ngram` and llama.cpp's lookup decoding) continues the most recent earlier
// occurrence of the sequence's last few tokens, on the host, with no weights.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace sparkserve::engine {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string_view name() const = 0;
  // True: the runner drafts (MTP); the engine never calls Propose.
  virtual bool on_runner() const { return false; }
  // Up to `max_drafts` tokens guessed to follow `tokens` (prompt + output); empty: no guess.
  virtual std::vector<int32_t> Propose(std::span<const int32_t> tokens, int32_t max_drafts) = 0;
};

class MtpDrafter : public Drafter {
 public:
  std::string_view name() const override { return "mtp"; }
  bool on_runner() const override { return true; }
  std::vector<int32_t> Propose(std::span<const int32_t>, int32_t) override { return {}; }
};

// The longest suffix of `tokens` of min_n..max_n tokens that occurred before; proposes what
// followed its most recent earlier occurrence.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int32_t min_n = 2, int32_t max_n = 4) : min_n_(min_n), max_n_(max_n) {}
  std::string_view name() const override { return "ngram"; }
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int32_t max_drafts) override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace sparkserve::engine
