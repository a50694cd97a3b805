// KvPagePool: the free list of KV cache pages (each `page_size` token positions of every attention
// layer). Sequences grow their page tables from it as they advance and give every page back when
// they finish or are preempted. Pages are reference counted: the prefix cache shares full pages
// between its entries and the sequences resumed from them; a page is free when its last holder
// releases it. Page ids only: the memory itself belongs to the ModelRunner.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace sparkserve::scheduler {

class KvPagePool {
 public:
  KvPagePool(int32_t num_pages, int32_t page_size);

  int32_t num_pages() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t page_size() const { return page_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  // Pages needed to hold `tokens` positions.
  int32_t PagesFor(int64_t tokens) const;
  // Pages `pages` lacks to cover `tokens` positions (0 when it already does).
  int32_t Missing(const std::vector<int32_t>& pages, int64_t tokens) const;

  // Appends pages to `pages` until they cover `tokens` positions. Takes nothing and returns false
  // when too few pages are free.
  bool Grow(std::vector<int32_t>& pages, int64_t tokens);
  // Returns the pages of `pages` past the first PagesFor(tokens) to the pool (rejected drafts'
  // positions).
  void Shrink(std::vector<int32_t>& pages, int64_t tokens);
  // Drops one reference of every page of `pages` (a page is free once none is left) and clears it.
  void Release(std::vector<int32_t>& pages);
  // Takes one more reference of each page (held pages only).
  void Retain(std::span<const int32_t> pages);
  // One free page (one reference), or -1 when none is free.
  int32_t Take();
  int32_t refs(int32_t page) const { return in_use_[static_cast<size_t>(page)]; }

 private:
  int32_t page_size_;
  std::vector<int32_t> free_;    // stack of free page ids (most recently freed on top)
  std::vector<int32_t> in_use_;  // [num_pages]: references (0: free); catches double frees
};

}  // namespace sparkserve::scheduler
