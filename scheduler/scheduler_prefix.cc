// Scheduler's prefix cache (scheduler.h, PrefixCacheConfig): where checkpoints go, taking one,
// resuming from one, eviction within the budget. The copies go into the next StepPlan, before its
// forward, in the order they were queued.
#include <algorithm>

#include "scheduler/scheduler.h"

namespace sparkserve::scheduler {

std::vector<int32_t> Scheduler::CachePointsFor(int32_t prompt_len, const std::vector<int32_t>& hints) const {
  std::vector<int32_t> points;
  for (int32_t p : hints) {
    if (p > 0 && p < prompt_len) points.push_back(p);
  }
  // Without hints (a completion prompt), the last prompt token: a repeat of the prompt resumes there.
  if (points.empty() && prompt_len > 1) points.push_back(prompt_len - 1);
  const int32_t every = config_.prefix.checkpoint_interval;
  for (int32_t p = every; every > 0 && p < prompt_len; p += every) points.push_back(p);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

int32_t Scheduler::NextCachePoint(const Sequence& seq) const {
  auto it = std::upper_bound(seq.cache_points.begin(), seq.cache_points.end(), seq.num_computed);
  return it == seq.cache_points.end() ? 0 : *it;
}

void Scheduler::AddCacheRefs(const std::vector<int32_t>& pages, int32_t sign) {
  for (int32_t p : pages) {
    int32_t& refs = cache_page_refs_[static_cast<size_t>(p)];
    if (sign > 0 && refs++ == 0) ++cache_pages_;
    if (sign < 0 && --refs == 0) --cache_pages_;
  }
}

int32_t Scheduler::num_cache_only_pages() const {
  int32_t n = 0;
  for (size_t p = 0; p < cache_page_refs_.size(); ++p) {
    const int32_t refs = cache_page_refs_[p];
    if (refs > 0 && pages_.refs(static_cast<int32_t>(p)) == refs) ++n;
  }
  return n;
}

bool Scheduler::EvictOne(int64_t keep) {
  std::optional<PrefixEntry> e = tree_.EvictLru(keep);
  if (!e) return false;
  slots_.Release(e->slot);
  AddCacheRefs(e->pages, -1);
  pages_.Release(e->pages);
  return true;
}

void Scheduler::EnforceCacheBudget() {
  while ((tree_.num_entries() > max_entries_ || cache_pages_ > max_cache_pages_) && EvictOne()) {
  }
}

void Scheduler::ClearPrefixCache() {
  while (EvictOne()) {
  }
  pending_copies_.clear();
  pending_page_copies_.clear();
}

void Scheduler::TakeCheckpoint(Sequence& seq) {
  const int32_t d = seq.num_computed;
  const std::span<const int32_t> path(seq.tokens.data(), static_cast<size_t>(d));
  if (tree_.Contains(path)) {
    tree_.Match(path, d);  // used again: keep it
    return;
  }
  if (tree_.num_entries() >= max_entries_) EvictOne();
  std::optional<model::SlotId> slot = slots_.Acquire();
  if (!slot) return;
  const int32_t ps = pages_.page_size();
  const int32_t full = d / ps;
  std::vector<int32_t> pages(seq.kv_pages.begin(), seq.kv_pages.begin() + full);
  if (d % ps != 0) {  // the partly filled last page: the entry's own copy (the sequence writes on in it)
    const int32_t own = pages_.Take();
    if (own < 0) {
      slots_.Release(*slot);
      return;
    }
    pending_page_copies_.push_back({seq.kv_pages[static_cast<size_t>(full)], own});
    pages_.Retain(pages);
    pages.push_back(own);
  } else {
    pages_.Retain(pages);
  }
  pending_copies_.push_back({seq.slot, *slot});
  AddCacheRefs(pages, +1);
  tree_.Insert(path, *slot, std::move(pages));
  EnforceCacheBudget();
}

void Scheduler::ResumeFrom(Sequence& seq, const PrefixEntry& entry) {
  const int32_t d = entry.depth;
  const int32_t ps = pages_.page_size();
  const int32_t full = d / ps;
  seq.kv_pages.assign(entry.pages.begin(), entry.pages.begin() + full);
  pages_.Retain(seq.kv_pages);
  if (d % ps != 0) {  // copy on write: the sequence writes positions d.. into its own copy
    const int32_t own = pages_.Take();  // the admission check left room for it
    pending_page_copies_.push_back({entry.pages[static_cast<size_t>(full)], own});
    seq.kv_pages.push_back(own);
  }
  pending_copies_.push_back({entry.slot, seq.slot});
  seq.num_computed = d;
}

}  // namespace sparkserve::scheduler
