// KvPagePool: free-list bookkeeping of KV cache page ids.
#include "scheduler/kv_page_pool.h"

#include <cstdlib>

#include "spdlog/spdlog.h"

namespace sparkserve::scheduler {

KvPagePool::KvPagePool(int32_t num_pages, int32_t page_size)
    : page_size_(page_size), in_use_(static_cast<size_t>(num_pages), 0) {
  free_.reserve(static_cast<size_t>(num_pages));
  // Highest id at the bottom so that page 0 is handed out first (readable plans in tests).
  for (int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

int32_t KvPagePool::PagesFor(int64_t tokens) const {
  return static_cast<int32_t>((tokens + page_size_ - 1) / page_size_);
}

int32_t KvPagePool::Missing(const std::vector<int32_t>& pages, int64_t tokens) const {
  int32_t need = PagesFor(tokens) - static_cast<int32_t>(pages.size());
  return need > 0 ? need : 0;
}

bool KvPagePool::Grow(std::vector<int32_t>& pages, int64_t tokens) {
  int32_t need = Missing(pages, tokens);
  if (need > num_free()) return false;
  for (int32_t i = 0; i < need; ++i) {
    int32_t p = free_.back();
    free_.pop_back();
    in_use_[static_cast<size_t>(p)] = 1;
    pages.push_back(p);
  }
  return true;
}

void KvPagePool::Shrink(std::vector<int32_t>& pages, int64_t tokens) {
  const auto keep = static_cast<size_t>(PagesFor(tokens));
  if (pages.size() <= keep) return;
  std::vector<int32_t> tail(pages.begin() + static_cast<std::ptrdiff_t>(keep), pages.end());
  pages.resize(keep);
  Release(tail);
}

void KvPagePool::Release(std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    if (p < 0 || p >= num_pages() || !in_use_[static_cast<size_t>(p)]) {
      // A scheduler bug that would hand one page to two sequences: stop before it corrupts output.
      spdlog::critical("KvPagePool: page {} released twice or never allocated", p);
      std::abort();
    }
    if (--in_use_[static_cast<size_t>(p)] == 0) free_.push_back(p);
  }
  pages.clear();
}

void KvPagePool::Retain(std::span<const int32_t> pages) {
  for (int32_t p : pages) {
    if (p < 0 || p >= num_pages() || !in_use_[static_cast<size_t>(p)]) {
      spdlog::critical("KvPagePool: page {} retained while free", p);
      std::abort();
    }
    ++in_use_[static_cast<size_t>(p)];
  }
}

int32_t KvPagePool::Take() {
  if (free_.empty()) return -1;
  const int32_t p = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(p)] = 1;
  return p;
}

}  // namespace sparkserve::scheduler
