// FakeModelRunner: a ModelRunner double for scheduler and engine tests. Its logits are a pure
// function of a sequence's token history (hash of the last tokens and the position), so batched,
// chunked and preempted runs must equal sequential ones exactly. It keeps what a real model keeps
// (per slot: the tokens in its state; per KV page: which slot wrote which token at each position)
// and fails Run when the plan breaks the contract: a slot must hold exactly start_pos tokens,
// kv_pages must be exactly the pages covering [0, start_pos + n), hold that sequence's own tokens
// (written by it or shared by the prefix cache) and those it writes appear in no other sequence
// of the step.
#pragma once
#include <cmath>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "fmt/format.h"
#include "model/model_runner.h"

namespace sparkserve::testing {

inline uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The logits row that follows `history` (its last token at position history.size() - 1).
inline std::vector<float> FakeLogits(const std::vector<int32_t>& history, int32_t vocab) {
  uint64_t h = Mix64(history.size());
  const size_t from = history.size() > 3 ? history.size() - 3 : 0;
  for (size_t i = from; i < history.size(); ++i) h = Mix64(h ^ static_cast<uint64_t>(history[i]));
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int32_t v = 0; v < vocab; ++v) {
    row[static_cast<size_t>(v)] = static_cast<float>(Mix64(h ^ (uint64_t{0xABCD} + v)) >> 40) * (8.0f / 16777216.0f);
  }
  return row;
}

// Greedy continuation of `prompt` under FakeLogits: what any correct engine must produce.
inline std::vector<int32_t> ReferenceGreedy(std::vector<int32_t> history, int32_t vocab, int32_t max_tokens,
                                            const std::vector<int32_t>& eos = {}) {
  std::vector<int32_t> out;
  while (static_cast<int32_t>(out.size()) < max_tokens) {
    const std::vector<float> row = FakeLogits(history, vocab);
    int32_t best = 0;
    for (int32_t v = 1; v < vocab; ++v) {
      if (row[static_cast<size_t>(v)] > row[static_cast<size_t>(best)]) best = v;
    }
    out.push_back(best);
    history.push_back(best);
    if (std::find(eos.begin(), eos.end(), best) != eos.end()) break;
  }
  return out;
}

class FakeModelRunner : public model::ModelRunner {
 public:
  explicit FakeModelRunner(model::ModelCapacity capacity)
      : capacity_(capacity),
        slot_history_(static_cast<size_t>(capacity.num_slots)),
        page_writer_(static_cast<size_t>(capacity.num_kv_pages),
                     std::vector<Cell>(static_cast<size_t>(capacity.kv_page_size))) {}

  model::ModelCapacity capacity() const override { return capacity_; }

  absl::StatusOr<model::StepOutput> Run(const model::StepPlan& plan) override {
    // The engine's mask thread may still be writing plan.masks (ModelRunner contract: ready() before
    // reading them); plans_ keeps a copy of the whole plan, masks included.
    plan.masks.WaitReady();
    std::lock_guard lock(mu_);
    for (const model::SlotCopy& c : plan.copies) {
      slot_history_.at(static_cast<size_t>(c.dst)) = slot_history_.at(static_cast<size_t>(c.src));
    }
    for (const model::PageCopy& c : plan.page_copies) {
      page_writer_.at(static_cast<size_t>(c.dst)) = page_writer_.at(static_cast<size_t>(c.src));
    }
    if (fail_next_) {
      fail_next_ = false;
      return absl::InternalError("injected device fault");
    }
    absl::Status s = CheckAndRun(plan);
    if (!s.ok()) {
      contract_errors_.push_back(std::string(s.message()));
      return s;
    }
    if (poison_next_) {
      poison_next_ = false;
      for (float& v : output_.logits.span<float>()) v = std::nanf("");
    }
    return output_;
  }

  void FailNextForward() {
    std::lock_guard lock(mu_);
    fail_next_ = true;
  }
  // The next forward's logits rows are all NaN (a numerically broken model).
  void PoisonNextLogits() {
    std::lock_guard lock(mu_);
    poison_next_ = true;
  }
  int64_t num_forwards() const {
    std::lock_guard lock(mu_);
    return static_cast<int64_t>(plans_.size());
  }
  std::vector<model::StepPlan> plans() const {
    std::lock_guard lock(mu_);
    return plans_;
  }
  std::vector<std::string> contract_errors() const {
    std::lock_guard lock(mu_);
    return contract_errors_;
  }

 private:
  struct Cell {
    int32_t slot = -1;   // who wrote it
    int32_t token = -1;
  };

  absl::Status CheckAndRun(const model::StepPlan& plan) {
    const int32_t ps = capacity_.kv_page_size, vocab = capacity_.vocab_size;
    std::set<int32_t> slots, pages;
    std::vector<std::vector<float>> rows;
    output_ = {};
    output_.logit_row_begin.push_back(0);
    for (const model::SeqWork& w : plan.seqs) {
      const int32_t n = static_cast<int32_t>(w.tokens.size());
      if (w.slot < 0 || w.slot >= capacity_.num_slots) return Err("slot {} out of range", w.slot);
      if (!slots.insert(w.slot).second) return Err("slot {} appears twice in one step", w.slot);
      if (n == 0) return Err("slot {}: no tokens", w.slot);
      std::vector<int32_t>& hist = slot_history_[static_cast<size_t>(w.slot)];
      if (w.start_pos == 0) hist.clear();
      if (static_cast<int32_t>(hist.size()) != w.start_pos) {
        return Err("slot {} holds {} tokens but the plan says start_pos {}", w.slot, hist.size(), w.start_pos);
      }
      const int32_t want_pages = (w.start_pos + n + ps - 1) / ps;
      if (static_cast<int32_t>(w.kv_pages.size()) != want_pages) {
        return Err("slot {}: {} kv pages for {} positions (want {})", w.slot, w.kv_pages.size(), w.start_pos + n,
                   want_pages);
      }
      for (size_t i = 0; i < w.kv_pages.size(); ++i) {
        const int32_t p = w.kv_pages[i];
        if (p < 0 || p >= capacity_.num_kv_pages) return Err("kv page {} out of range", p);
        // Pages before start_pos may be shared (prefix cache); a page this step writes may not.
        const bool written = static_cast<int32_t>(i + 1) * ps > w.start_pos;
        if (written && !pages.insert(p).second) return Err("kv page {} written by two sequences in one step", p);
      }
      for (int32_t pos = 0; pos < w.start_pos; ++pos) {
        const Cell& c = CellAt(w, pos);
        if (c.token != hist[static_cast<size_t>(pos)]) {
          return Err("slot {}: KV at position {} was overwritten (page {} written by slot {})", w.slot, pos,
                     w.kv_pages[static_cast<size_t>(pos / ps)], c.slot);
        }
      }
      for (int32_t j = 0; j < n; ++j) {
        const int32_t t = w.tokens[static_cast<size_t>(j)];
        if (t < 0 || t >= vocab) return Err("token {} out of the vocabulary", t);
        CellAt(w, w.start_pos + j) = {w.slot, t};
        hist.push_back(t);
        const bool wanted = w.logits == model::LogitsWanted::kAll ||
                            (w.logits == model::LogitsWanted::kLast && j == n - 1);
        if (wanted) {
          std::vector<int32_t> prefix(hist.begin(), hist.end());
          rows.push_back(FakeLogits(prefix, vocab));
        }
      }
      output_.logit_row_begin.push_back(static_cast<int32_t>(rows.size()));
    }
    output_.logits = core::Tensor::Zeros({static_cast<int64_t>(rows.size()), vocab}, core::DType::kF32);
    float* out = output_.logits.data<float>();
    for (size_t r = 0; r < rows.size(); ++r) std::copy(rows[r].begin(), rows[r].end(), out + r * vocab);
    plans_.push_back(plan);
    return absl::OkStatus();
  }

  Cell& CellAt(const model::SeqWork& w, int32_t pos) {
    const int32_t ps = capacity_.kv_page_size;
    return page_writer_[static_cast<size_t>(w.kv_pages[static_cast<size_t>(pos / ps)])][static_cast<size_t>(pos % ps)];
  }

  template <typename... Args>
  static absl::Status Err(fmt::format_string<Args...> f, Args&&... args) {
    return absl::FailedPreconditionError(
        fmt::format("plan breaks the ModelRunner contract: {}", fmt::format(f, std::forward<Args>(args)...)));
  }

  model::ModelCapacity capacity_;
  mutable std::mutex mu_;
  std::vector<std::vector<int32_t>> slot_history_;  // [num_slots]: tokens in each slot's state
  std::vector<std::vector<Cell>> page_writer_;      // [num_kv_pages][page_size]
  std::vector<model::StepPlan> plans_;
  std::vector<std::string> contract_errors_;
  model::StepOutput output_;
  bool fail_next_ = false;
  bool poison_next_ = false;
};

}  // namespace sparkserve::testing
