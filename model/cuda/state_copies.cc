// CudaModelRunner's state copies of a StepPlan (slot copies, KV page copies): stream-ordered
// device-to-device copies before the step's forward, never a host sync.
#include "model/cuda/cuda_model_runner.h"

#include "core/status.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::model::cuda {

absl::Status CudaModelRunner::EnqueueSlotCopy(SlotId src, SlotId dst) {
  const int32_t n = options_.num_slots;
  auto copy = [&](void* data, size_t bytes) {  // slot src's share of a [num_slots, ...] buffer onto dst's
    const size_t per_slot = bytes / static_cast<size_t>(n);
    uint8_t* base = static_cast<uint8_t*>(data);
    return cudaMemcpyAsync(base + per_slot * dst, base + per_slot * src, per_slot, cudaMemcpyDeviceToDevice, stream_);
  };
  for (GdnState& g : gdn_) {
    CUDA_RETURN_IF_ERROR(copy(g.recurrent.data(), g.recurrent.bytes()));
    CUDA_RETURN_IF_ERROR(copy(g.conv.data(), g.conv.bytes()));
  }
  return absl::OkStatus();
}

absl::Status CudaModelRunner::EnqueuePageCopy(int32_t src, int32_t dst) {
  const size_t pages = static_cast<size_t>(options_.num_kv_pages);
  for (KvState& kv : kv_) {
    for (DeviceBuffer<uint8_t>* b : {&kv.k, &kv.v}) {
      const size_t per_page = b->bytes() / pages;  // [num_pages, page_size, kv_r, head_dim]
      uint8_t* base = b->data();
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + per_page * static_cast<size_t>(dst),
                                           base + per_page * static_cast<size_t>(src), per_page,
                                           cudaMemcpyDeviceToDevice, stream_));
    }
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
