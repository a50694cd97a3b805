// In-process collective: ranks publish their buffers, meet at a barrier, read everyone's, meet
// again; device buffers are staged through host memory. The default WaitDevice.
#include "core/collective.h"

#include <algorithm>

#include "core/status.h"
#include "fmt/format.h"
#ifdef SPARKSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sparkserve::core {

#ifdef SPARKSERVE_WITH_CUDA
namespace {

absl::Status CudaCheck(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

class CudaStaging : public DeviceStaging {
 public:
  absl::Status Wait(void* stream) override {
    return CudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }
  absl::Status ToHost(const float* device, size_t count, float* host, void* stream) override {
    RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(host, device, count * sizeof(float), cudaMemcpyDeviceToHost,
                                              static_cast<cudaStream_t>(stream)),
                              "staging copy down"));
    return Wait(stream);
  }
  absl::Status ToDevice(const float* host, size_t count, float* device, void* stream) override {
    RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(device, host, count * sizeof(float), cudaMemcpyHostToDevice,
                                              static_cast<cudaStream_t>(stream)),
                              "staging copy up"));
    return Wait(stream);
  }
};

}  // namespace

std::shared_ptr<DeviceStaging> CudaDeviceStaging() { return std::make_shared<CudaStaging>(); }

absl::Status Collective::WaitDevice(void* stream) {
  return CudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}
#else
std::shared_ptr<DeviceStaging> CudaDeviceStaging() { return nullptr; }

absl::Status Collective::WaitDevice(void*) {
  return absl::FailedPreconditionError("WaitDevice: this sparkserve was built without CUDA");
}
#endif

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

  // Device buffers through host copies. A rank whose copy fails still meets the others (with no
  // data), so that every rank fails instead of waiting for it.
  absl::Status AllReduceSumDevice(float* data, size_t count, void* stream) override {
    RETURN_IF_ERROR(CheckStaging());
    std::vector<float> host(count);
    const absl::Status down = g_->staging_->ToHost(data, count, host.data(), stream);
    const absl::Status sum = AllReduceSum(down.ok() ? std::span<float>(host) : std::span<float>());
    RETURN_IF_ERROR(down);
    RETURN_IF_ERROR(sum);
    return g_->staging_->ToDevice(host.data(), count, data, stream);
  }

  absl::Status AllGatherDevice(const float* local, size_t count, float* out, void* stream) override {
    RETURN_IF_ERROR(CheckStaging());
    std::vector<float> host(count);
    const absl::Status down = g_->staging_->ToHost(local, count, host.data(), stream);
    g_->ptrs_[r_] = host.data();
    g_->sizes_[r_] = down.ok() ? count : ~size_t{0};
    g_->barrier_.arrive_and_wait();
    std::vector<float> all;
    bool equal = true;
    for (int32_t q = 0; q < g_->world_; ++q) equal = equal && g_->sizes_[q] == count;
    if (equal) {
      all.reserve(count * static_cast<size_t>(g_->world_));
      for (int32_t q = 0; q < g_->world_; ++q) all.insert(all.end(), g_->ptrs_[q], g_->ptrs_[q] + count);
    }
    g_->barrier_.arrive_and_wait();  // everyone has read before anyone's buffer goes
    RETURN_IF_ERROR(down);
    if (!equal) {
      return absl::InvalidArgumentError(
          "AllGatherDevice: ranks passed different counts, or a rank could not read its buffer");
    }
    return g_->staging_->ToDevice(all.data(), all.size(), out, stream);
  }

  absl::Status WaitDevice(void* stream) override {
    RETURN_IF_ERROR(CheckStaging());
    return g_->staging_->Wait(stream);
  }

  std::string transport() const override {
    return g_->staging_ ? "in-process (device buffers staged through host memory)" : "in-process";
  }

 private:
  absl::Status CheckStaging() const {
    if (g_->staging_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "in-process collective: no device staging (this sparkserve was built without CUDA)");
  }

  InProcessGroup* g_;
  int32_t r_;
};

absl::Status ReplaceableCollective::Replace(std::unique_ptr<Collective> backend) {
  if (backend && (backend->rank() != rank_ || backend->world() != world_)) {
    return absl::InvalidArgumentError(fmt::format("collective of rank {} of {} cannot stand in for rank {} of {}",
                                                  backend->rank(), backend->world(), rank_, world_));
  }
  backend_ = std::move(backend);
  ++epoch_;  // device work captured on the previous group is stale
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

bool ReplaceableCollective::device_capturable() const { return backend_ && backend_->device_capturable(); }

absl::Status ReplaceableCollective::WaitDevice(void* stream) {
  return backend_ ? backend_->WaitDevice(stream) : NoBackend();
}

InProcessGroup::InProcessGroup(int32_t world, std::shared_ptr<DeviceStaging> staging)
    : world_(world), staging_(std::move(staging)), barrier_(world), ptrs_(world), sizes_(world) {
  for (int32_t r = 0; r < world; ++r) ranks_.push_back(std::make_unique<Rank>(this, r));
}

InProcessGroup::~InProcessGroup() = default;

}  // namespace sparkserve::core
