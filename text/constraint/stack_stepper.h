// The pushdown matcher's byte step. A match in progress is a set of stacks; a stack is its top
// frame (rule, state) plus a pointer to the frames below it, which live in a NodeStore (shared
// between stacks, interned so that equal stacks are equal ids) or, for throw-away walks over
// candidate tokens, in the stepper's scratch list.
//
// Tops are kept "expanded": a top's state always has byte edges. Expanding a frame that was just
// reached follows its calls (pushing the return frame) and, when the state may end its rule, pops
// into the frame below; reaching the bottom of the stack means the text so far is complete (for
// the matcher) or that the rule the walk started in has ended (for the mask precomputation).
#pragma once
#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "text/constraint/grammar_automaton.h"

namespace sparkserve::text::constraint {

inline constexpr int32_t kStackBottom = -1;  // below the first frame

struct StackFrame {
  int32_t rule = 0;
  int32_t state = 0;
  int32_t parent = kStackBottom;  // >= 0: a NodeStore id; <= -2: scratch node -2 - i
  bool operator==(const StackFrame&) const = default;
  auto operator<=>(const StackFrame&) const = default;
};

// Frames below the tops, interned: (rule, return state, parent) -> id, ids >= 0.
class NodeStore {
 public:
  int32_t Intern(int32_t rule, int32_t state, int32_t parent);
  const StackFrame& at(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }

 private:
  std::vector<StackFrame> nodes_;
  absl::flat_hash_map<std::tuple<int32_t, int32_t, int32_t>, int32_t> ids_;
};

class StackStepper {
 public:
  // `nodes`: the frames below the tops. With `intern` the frames pushed by calls go into `nodes`
  // (a matcher accepting bytes); without, into scratch (walks that are thrown away).
  StackStepper(const GrammarAutomaton& automaton, NodeStore* nodes, bool intern)
      : g_(automaton), nodes_(nodes), intern_(intern) {}

  // Expands a frame just reached (after a byte, or the start); appends its tops to `out`. Returns
  // whether some path pops the bottom of the stack.
  bool Expand(StackFrame frame, std::vector<StackFrame>& out);
  // Every top of `in` reads `byte`; the expanded results are appended to `out`, without
  // duplicates among them. Returns whether some path popped the bottom after the byte.
  bool Step(std::span<const StackFrame> in, uint8_t byte, std::vector<StackFrame>& out);

  size_t scratch_size() const { return scratch_.size(); }
  void TruncateScratch(size_t size) { scratch_.resize(size); }
  const GrammarAutomaton& automaton() const { return g_; }

 private:
  const StackFrame& Node(int32_t id) const {
    return id >= 0 ? nodes_->at(id) : scratch_[static_cast<size_t>(-2 - id)];
  }
  int32_t Push(int32_t rule, int32_t state, int32_t parent);

  const GrammarAutomaton& g_;
  NodeStore* nodes_;
  bool intern_;
  std::vector<StackFrame> scratch_;
  std::vector<StackFrame> work_;
};

// Sorts `tops[begin, end)` and drops duplicates (the vector is cut to the new end).
void DedupeTops(std::vector<StackFrame>& tops, size_t begin);

// Walks a list of tokens sorted by bytes from the stacks `start`, sharing the work on common
// prefixes. For token i, `token(i)` gives its bytes and `shared(i)` how many leading bytes it
// shares with token i - 1 (0 for the first). With `follow` (mask precomputation), reaching the
// bottom with bytes left whose next byte is in `follow` makes the token "uncertain" (it depends on
// the frames below); without, text cannot continue past the bottom.
// `on_token(i, accepted, uncertain)` is called for every token in order.
template <class TokenFn, class SharedFn, class OnToken>
void WalkSortedTokens(StackStepper& stepper, std::span<const StackFrame> start, int32_t count, TokenFn token,
                      SharedFn shared, const std::bitset<256>* follow, OnToken on_token);

// ---- implementation of the template

namespace walk_detail {
struct Level {
  size_t tops_begin = 0, tops_end = 0;
  bool bottom = false;  // some path popped the bottom after this many bytes
  bool escaped = false; // some path left the bottom with the next byte in `follow`, before this depth
  size_t scratch = 0;
};
}  // namespace walk_detail

template <class TokenFn, class SharedFn, class OnToken>
void WalkSortedTokens(StackStepper& stepper, std::span<const StackFrame> start, int32_t count, TokenFn token,
                      SharedFn shared, const std::bitset<256>* follow, OnToken on_token) {
  using walk_detail::Level;
  thread_local std::vector<StackFrame> arena;
  thread_local std::vector<Level> levels;
  arena.assign(start.begin(), start.end());
  levels.assign(1, Level{0, arena.size(), false, false, stepper.scratch_size()});
  const size_t base_scratch = stepper.scratch_size();
  int32_t valid = 0;  // levels[0 .. valid] hold the previous token's prefix
  for (int32_t i = 0; i < count; ++i) {
    const std::string_view bytes = token(i);
    const int32_t n = static_cast<int32_t>(bytes.size());
    int32_t d = std::min(i == 0 ? 0 : shared(i), valid);
    arena.resize(levels[static_cast<size_t>(d)].tops_end);
    stepper.TruncateScratch(levels[static_cast<size_t>(d)].scratch);
    levels.resize(static_cast<size_t>(d) + 1);
    while (d < n && levels[static_cast<size_t>(d)].tops_end > levels[static_cast<size_t>(d)].tops_begin) {
      const Level& at = levels[static_cast<size_t>(d)];
      const uint8_t byte = static_cast<uint8_t>(bytes[static_cast<size_t>(d)]);
      Level next;
      next.escaped = at.escaped || (at.bottom && follow != nullptr && follow->test(byte));
      next.tops_begin = arena.size();
      // Step reads from the arena while appending to it: copy the inputs' span bounds first.
      const size_t in_begin = at.tops_begin, in_end = at.tops_end;
      thread_local std::vector<StackFrame> in;
      in.assign(arena.begin() + static_cast<std::ptrdiff_t>(in_begin), arena.begin() + static_cast<std::ptrdiff_t>(in_end));
      next.bottom = stepper.Step(in, byte, arena);
      next.tops_end = arena.size();
      next.scratch = stepper.scratch_size();
      levels.push_back(next);
      ++d;
    }
    valid = d;
    const Level& last = levels[static_cast<size_t>(d)];
    bool accepted = false, uncertain = false;
    if (d == n) {
      accepted = last.tops_end > last.tops_begin || last.bottom;
      uncertain = !accepted && last.escaped;
    } else {
      uncertain = last.escaped ||
                  (last.bottom && follow != nullptr && follow->test(static_cast<uint8_t>(bytes[static_cast<size_t>(d)])));
    }
    on_token(i, accepted, uncertain);
  }
  stepper.TruncateScratch(base_scratch);
}

}  // namespace sparkserve::text::constraint
