// PrefixTree: a radix tree (edges labelled with token runs, split where paths diverge).
#include "scheduler/prefix_tree.h"

#include <algorithm>

namespace sparkserve::scheduler {

struct PrefixTree::Node {
  std::vector<int32_t> edge;  // tokens from the parent to here
  Node* parent = nullptr;
  int32_t depth = 0;          // tokens from the root to here
  std::map<int32_t, std::unique_ptr<Node>> children;  // by the first token of their edge
  std::optional<PrefixEntry> entry;
};

PrefixTree::PrefixTree() : root_(std::make_unique<Node>()) {}
PrefixTree::~PrefixTree() = default;

template <typename F>
void PrefixTree::Walk(std::span<const int32_t> tokens, F&& visit) const {
  const Node* node = root_.get();
  size_t pos = 0;
  for (;;) {
    visit(node, pos);
    if (pos == tokens.size()) return;
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) return;
    const std::vector<int32_t>& edge = it->second->edge;
    if (pos + edge.size() > tokens.size() || !std::equal(edge.begin(), edge.end(), tokens.begin() + pos)) return;
    node = it->second.get();
    pos += edge.size();
  }
}

const PrefixEntry* PrefixTree::Match(std::span<const int32_t> tokens, int32_t max_depth) {
  const Node* best = nullptr;
  Walk(tokens, [&](const Node* node, size_t depth) {
    if (node->entry && static_cast<int64_t>(depth) <= max_depth) best = node;
  });
  if (best == nullptr) return nullptr;
  Node* found = const_cast<Node*>(best);
  found->entry->last_use = ++clock_;
  return &*found->entry;
}

bool PrefixTree::Contains(std::span<const int32_t> tokens) const {
  bool found = false;
  Walk(tokens, [&](const Node* node, size_t depth) { found = depth == tokens.size() && node->entry.has_value(); });
  return found;
}

bool PrefixTree::Insert(std::span<const int32_t> tokens, model::SlotId slot, std::vector<int32_t> pages) {
  if (tokens.empty()) return false;
  Node* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {  // a new leaf with the rest of the path
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + pos, tokens.end());
      leaf->parent = node;
      leaf->depth = static_cast<int32_t>(tokens.size());
      Node* raw = leaf.get();
      node->children.emplace(tokens[pos], std::move(leaf));
      ++num_nodes_;
      node = raw;
      pos = tokens.size();
      break;
    }
    Node* child = it->second.get();
    const size_t most = std::min(child->edge.size(), tokens.size() - pos);
    size_t l = 0;
    while (l < most && child->edge[l] == tokens[pos + l]) ++l;
    if (l == child->edge.size()) {
      node = child;
      pos += l;
      continue;
    }
    // Split child's edge after l tokens: node -> mid -> child.
    auto mid = std::make_unique<Node>();
    mid->edge.assign(child->edge.begin(), child->edge.begin() + static_cast<std::ptrdiff_t>(l));
    mid->parent = node;
    mid->depth = node->depth + static_cast<int32_t>(l);
    std::unique_ptr<Node> moved = std::move(it->second);
    moved->edge.erase(moved->edge.begin(), moved->edge.begin() + static_cast<std::ptrdiff_t>(l));
    moved->parent = mid.get();
    const int32_t first = moved->edge.front();
    mid->children.emplace(first, std::move(moved));
    Node* raw = mid.get();
    it->second = std::move(mid);
    ++num_nodes_;
    node = raw;
    pos += l;
  }
  if (node->entry) return false;
  PrefixEntry e;
  e.depth = static_cast<int32_t>(tokens.size());
  e.slot = slot;
  e.pages = std::move(pages);
  e.last_use = ++clock_;
  e.id = next_id_++;
  node->entry = std::move(e);
  entries_.push_back(node);
  return true;
}

std::optional<PrefixEntry> PrefixTree::EvictLru(int64_t keep) {
  auto victim = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->entry->id == keep) continue;
    if (victim == entries_.end() || (*it)->entry->last_use < (*victim)->entry->last_use) victim = it;
  }
  if (victim == entries_.end()) return std::nullopt;
  Node* node = *victim;
  entries_.erase(victim);
  PrefixEntry out = std::move(*node->entry);
  node->entry.reset();
  Prune(node);
  return out;
}

std::vector<PrefixEntry> PrefixTree::Clear() {
  std::vector<PrefixEntry> out;
  while (auto e = EvictLru()) out.push_back(std::move(*e));
  return out;
}

void PrefixTree::Prune(Node* node) {
  while (node != root_.get() && !node->entry && node->children.empty()) {
    Node* parent = node->parent;
    parent->children.erase(node->edge.front());  // destroys node
    --num_nodes_;
    node = parent;
  }
}

}  // namespace sparkserve::scheduler
