// In-process collective: ranks publish their buffers, meet at a barrier, read everyone's, meet again.
#include "core/collective.h"

#include <algorithm>

#include "fmt/format.h"

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

absl::Status ReplaceableCollective::Replace(std::unique_ptr<Collective> backend) {
  if (backend && (backend->rank() != rank_ || backend->world() != world_)) {
    return absl::InvalidArgumentError(fmt::format("collective of rank {} of {} cannot stand in for rank {} of {}",
                                                  backend->rank(), backend->world(), rank_, world_));
  }
  backend_ = std::move(backend);
  return absl::OkStatus();
}

absl::Status ReplaceableCollective::NoBackend() const {
  return absl::UnavailableError(
      fmt::format("rank {} of {} is not joined to its tensor-parallel group (lost, or not synced yet)", rank_, world_));
}

absl::Status ReplaceableCollective::AllReduceSum(std::span<float> data) {
  return backend_ ? backend_->AllReduceSum(data) : NoBackend();
}

absl::Status ReplaceableCollective::AllGather(std::span<const float> local, std::vector<float>* out) {
  return backend_ ? backend_->AllGather(local, out) : NoBackend();
}

absl::Status ReplaceableCollective::AllReduceSumDevice(float* data, size_t count, void* stream) {
  return backend_ ? backend_->AllReduceSumDevice(data, count, stream) : NoBackend();
}

absl::Status ReplaceableCollective::AllGatherDevice(const float* local, size_t count, float* out, void* stream) {
  return backend_ ? backend_->AllGatherDevice(local, count, out, stream) : NoBackend();
}

std::string ReplaceableCollective::transport() const { return backend_ ? backend_->transport() : "none (not joined)"; }

InProcessGroup::InProcessGroup(int32_t world)
    : world_(world), barrier_(world), ptrs_(world), sizes_(world) {
  for (int32_t r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

}  // namespace sparkserve::core
