// ThreadPool: a fixed set of workers for data-parallel loops (CPU kernels split rows/heads over it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparkserve::core {

class ThreadPool {
 public:
  // `threads` <= 0 means the hardware concurrency (or SPARKSERVE_THREADS when set).
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over [0, n) split into contiguous chunks of at least `grain` items; the
  // calling thread takes part. Returns when every chunk is done. Not re-entrant from inside fn.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The process-wide pool.
  static ThreadPool& Global();

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::mutex call_mu_;  // serialises ParallelFor callers
};

}  // namespace sparkserve::core
