// MaskFiller: computes a step's token masks (structured outputs) on its own thread while the
// engine thread runs the model's forward. The tokens the masks depend on were accepted in the
// previous step's postprocess, so the work overlaps the forward and the step waits only for
// whichever of the two ends last. Several rows are spread over the core thread pool.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "scheduler/output_constraint.h"

namespace sparkserve::engine {

class MaskFiller {
 public:
  struct Row {
    scheduler::ConstraintMatcher* matcher = nullptr;
    std::span<uint32_t> words;         // the row's mask, filled here
    std::span<const int32_t> stop_ids; // set too when the matcher can end (those without text)
  };

  MaskFiller();
  ~MaskFiller();
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;

  // Starts filling `rows` (the previous job must be waited for). With no rows, nothing starts.
  void Start(std::vector<Row> rows);
  // Returns once the started job is done (at once when none is running). Thread-safe.
  void Wait();
  // Seconds the last job computed for, and the total of every job so far.
  double last_compute_seconds() const;
  double total_compute_seconds() const;

 private:
  void Loop();
  void Fill();

  mutable std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<Row> rows_;
  bool pending_ = false;   // a job is started and not finished
  bool stop_ = false;
  double last_seconds_ = 0.0, total_seconds_ = 0.0;
  std::thread thread_;  // last: started once everything it uses is constructed
};

}  // namespace sparkserve::engine
