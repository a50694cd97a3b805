// VerifyColumns: the CUDA runner's side of verify windows (speculative decoding). A forward seq with
// keep_column_states writes every GDN layer's recurrent state and conv window after each of its
// columns into per-slot column buffers; a later step's ColumnCommit makes column accepted - 1 the
// slot's state (one kernel for every commit and layer). Needs the f32 GDN state.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/column_commit.h"
#include "kernels/cuda/device_buffer.h"
#include "model/step_plan.h"

namespace sparkserve::model::cuda {

class VerifyColumns {
 public:
  VerifyColumns() = default;
  VerifyColumns(const VerifyColumns&) = delete;
  VerifyColumns& operator=(const VerifyColumns&) = delete;
  ~VerifyColumns();

  // Per GDN layer: its slots' recurrent state f32 [num_slots, state_floats] and conv window f32
  // [num_slots, window_floats]. max_columns < 2: nothing is kept (max_columns() is 1). Adds the
  // bytes it allocates to *total.
  absl::Status Init(int max_columns, int num_slots, const std::vector<float*>& states, const std::vector<float*>& windows,
                    int64_t state_floats, int64_t window_floats, int64_t* total);
  int max_columns() const { return max_columns_; }
  // The column buffers of GDN layer `i`: [num_slots, max_columns, state_floats] / [..., window_floats].
  float* column_state(int i) { return column_states_[static_cast<size_t>(i)].data(); }
  float* column_window(int i) { return column_windows_[static_cast<size_t>(i)].data(); }
  // Before the step changes anything: each commit names a slot whose last forward kept at least
  // that many columns.
  absl::Status Check(const std::vector<ColumnCommit>& commits) const;
  // Enqueues the commits on `stream` (after Check).
  absl::Status Commit(const std::vector<ColumnCommit>& commits, cudaStream_t stream);
  // After a forward: its keep_column_states seqs' slots have their columns pending, its other seqs'
  // none. Slot copies and resets clear a slot too.
  void AfterForward(const StepPlan& plan);
  void Clear(SlotId slot) { pending_[static_cast<size_t>(slot)] = 0; }

 private:
  int max_columns_ = 1;
  std::vector<int32_t> pending_;  // per slot: columns its last forward kept (0: none)
  std::vector<kernels::cuda::DeviceBuffer<float>> column_states_, column_windows_;
  kernels::cuda::DeviceBuffer<float*> state_ptrs_, column_state_ptrs_, window_ptrs_, column_window_ptrs_;
  kernels::cuda::ColumnCommitLayers layers_;
  int32_t* staging_host_ = nullptr;                 // pinned [2, num_slots]: slots | columns
  kernels::cuda::DeviceBuffer<int32_t> staging_device_;
};

}  // namespace sparkserve::model::cuda
