// MaskFiller: one worker thread, one job at a time.
#include "engine/mask_filler.h"

#include "core/thread_pool.h"

namespace sparkserve::engine {

MaskFiller::MaskFiller() { thread_ = std::thread(&MaskFiller::Loop, this); }

MaskFiller::~MaskFiller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MaskFiller::Start(std::vector<Row> rows) {
  if (rows.empty()) return;
  {
    std::lock_guard lock(mu_);
    rows_ = std::move(rows);
    pending_ = true;
  }
  wake_.notify_all();
}

void MaskFiller::Wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return !pending_; });
}

double MaskFiller::last_compute_seconds() const {
  std::lock_guard lock(mu_);
  return last_seconds_;
}

double MaskFiller::total_compute_seconds() const {
  std::lock_guard lock(mu_);
  return total_seconds_;
}

void MaskFiller::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || pending_; });
      if (stop_) return;
    }
    const auto start = std::chrono::steady_clock::now();
    Fill();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard lock(mu_);
      pending_ = false;
      last_seconds_ = seconds;
      total_seconds_ += seconds;
    }
    done_.notify_all();
  }
}

void MaskFiller::Fill() {
  auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Row& r = rows_[static_cast<size_t>(i)];
      r.matcher->FillMask(r.words);
      if (r.matcher->CanEnd()) {  // stop ids with text are the grammar's to allow, as text
        for (const int32_t id : r.stop_ids) {
          if (id >= 0 && static_cast<size_t>(id >> 5) < r.words.size() && !r.matcher->IsText(id)) {
            r.words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
          }
        }
      }
    }
  };
  const auto n = static_cast<int64_t>(rows_.size());
  if (n == 1) {
    fill(0, 1);
  } else {
    core::ThreadPool::Global().ParallelFor(n, 1, fill);
  }
}

}  // namespace sparkserve::engine
