// In-process collective: ranks publish their buffers, meet at a barrier, read everyone's, meet again.
#include "core/collective.h"

#include <algorithm>

namespace sparkserve::core {

class InProcessGroup::Rank : public Collective {
 public:
  Rank(InProcessGroup* g, int32_t r) : g_(g), r_(r) {}
  int32_t rank() const override { return r_; }
  int32_t world() const override { return g_->world_; }

  absl::Status AllReduceSum(std::span<float> data) override {
    g_->ptrs_[r_] = data.data();
    g_->sizes_[r_] = data.size();
    g_->barrier_.arrive_and_wait();
    for (int32_t q = 0; q < g_->world_; ++q) {
      if (g_->sizes_[q] != data.size()) {
        g_->barrier_.arrive_and_wait();
        return absl::InvalidArgumentError("AllReduceSum: ranks passed buffers of different lengths");
      }
    }
    std::vector<float> sum(g_->ptrs_[0], g_->ptrs_[0] + data.size());
    for (int32_t q = 1; q < g_->world_; ++q) {
      const float* p = g_->ptrs_[q];
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
    }
    g_->barrier_.arrive_and_wait();  // everyone has read before anyone writes
    std::copy(sum.begin(), sum.end(), data.begin());
    return absl::OkStatus();
  }

  absl::Status AllGather(std::span<const float> local, std::vector<float>* out) override {
    g_->ptrs_[r_] = local.data();
    g_->sizes_[r_] = local.size();
    g_->barrier_.arrive_and_wait();
    out->clear();
    for (int32_t q = 0; q < g_->world_; ++q) out->insert(out->end(), g_->ptrs_[q], g_->ptrs_[q] + g_->sizes_[q]);
    g_->barrier_.arrive_and_wait();
    return absl::OkStatus();
  }

 private:
  InProcessGroup* g_;
  int32_t r_;
};

InProcessGroup::InProcessGroup(int32_t world)
    : world_(world), barrier_(world), ptrs_(world), sizes_(world) {
  for (int32_t r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

}  // namespace sparkserve::core
