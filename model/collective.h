// Collective: the two tensor-parallel exchanges the model makes (sum of partial outputs after
// o_proj/out_proj/down_proj; gather of vocab-split logits). Backends: a single rank (no-op), an
// in-process group of threads (tests), Gloo/NCCL later (cluster layer). Results are identical on
// every rank: sums are taken in rank order.
#pragma once
#include <barrier>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace sparkserve::model {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t world() const = 0;
  // data = sum over ranks of data (same length on every rank).
  virtual absl::Status AllReduceSum(std::span<float> data) = 0;
  // out = concatenation of every rank's `local` in rank order (lengths may differ).
  virtual absl::Status AllGather(std::span<const float> local, std::vector<float>* out) = 0;
};

// One rank: the sum is the data, the gather is a copy.
class SingleRankCollective : public Collective {
 public:
  int32_t rank() const override { return 0; }
  int32_t world() const override { return 1; }
  absl::Status AllReduceSum(std::span<float>) override { return absl::OkStatus(); }
  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override {
    out->assign(local.begin(), local.end());
    return absl::OkStatus();
  }
};

// N ranks as N threads of one process (each rank calls from its own thread, in lockstep).
class InProcessGroup {
 public:
  explicit InProcessGroup(int32_t world);
  ~InProcessGroup();
  Collective& rank(int32_t r) { return *ranks_[static_cast<size_t>(r)]; }

 private:
  class Rank;
  friend class Rank;
  int32_t world_;
  std::barrier<> barrier_;
  std::vector<const float*> ptrs_;
  std::vector<size_t> sizes_;
  std::vector<std::unique_ptr<Collective>> ranks_;
};

}  // namespace sparkserve::model
