// PrefixTree: the prefix cache's radix tree over token ids. An entry at depth d (a checkpoint)
// names a state slot holding the GDN recurrent state and conv window after the path's d tokens,
// and the KV pages covering positions [0, d) (full pages shared by reference, the last partial one
// the entry's own). Ids only: the scheduler owns slots and pages, the runner their memory.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/step_plan.h"

namespace sparkserve::scheduler {

struct PrefixEntry {
  int32_t depth = 0;            // tokens of state it holds
  model::SlotId slot = -1;
  std::vector<int32_t> pages;   // KV pages covering [0, depth)
  int64_t last_use = 0;         // LRU clock
  int64_t id = 0;               // unique, for callers that hold on to an entry across calls
};

class PrefixTree {
 public:
  PrefixTree();
  ~PrefixTree();
  PrefixTree(const PrefixTree&) = delete;
  PrefixTree& operator=(const PrefixTree&) = delete;

  // The deepest entry on `tokens`' path whose depth is at most `max_depth`; null: none. Marks it used.
  const PrefixEntry* Match(std::span<const int32_t> tokens, int32_t max_depth);
  // Whether an entry sits at exactly `tokens`' path.
  bool Contains(std::span<const int32_t> tokens) const;
  // Adds an entry at `tokens`' path (depth = tokens.size() >= 1). False (nothing changes) when one
  // is there already.
  bool Insert(std::span<const int32_t> tokens, model::SlotId slot, std::vector<int32_t> pages);
  // Removes the least recently used entry other than the one with id `keep` and returns it (its
  // slot and pages are the caller's to release); nullopt when there is none.
  std::optional<PrefixEntry> EvictLru(int64_t keep = -1);
  // Removes every entry (returned, as EvictLru's).
  std::vector<PrefixEntry> Clear();

  int32_t num_entries() const { return static_cast<int32_t>(entries_.size()); }
  int32_t num_nodes() const { return num_nodes_; }

 private:
  struct Node;
  // Walks `tokens`; calls visit(node, depth) at every node boundary reached on the path.
  template <typename F>
  void Walk(std::span<const int32_t> tokens, F&& visit) const;
  void Prune(Node* node);

  std::unique_ptr<Node> root_;
  std::vector<Node*> entries_;  // nodes holding an entry
  int64_t clock_ = 0;
  int64_t next_id_ = 1;
  int32_t num_nodes_ = 1;
};

}  // namespace sparkserve::scheduler
