// VerifyColumns: column buffers, commit checks and the commit launch.
#include "model/cuda/verify_columns.h"

#include <span>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"

namespace sparkserve::model::cuda {

namespace kc = kernels::cuda;

VerifyColumns::~VerifyColumns() {
  if (staging_host_ != nullptr) cudaFreeHost(staging_host_);
}

absl::Status VerifyColumns::Init(int max_columns, int num_slots, const std::vector<float*>& states,
                                 const std::vector<float*>& windows, int64_t state_floats, int64_t window_floats,
                                 int64_t* total) {
  pending_.assign(static_cast<size_t>(num_slots), 0);
  if (max_columns < 2 || states.empty()) return absl::OkStatus();
  max_columns_ = max_columns;
  const auto per_layer = [&](int64_t floats) { return static_cast<size_t>(int64_t{num_slots} * max_columns * floats); };
  std::vector<float*> column_states, column_windows;
  for (size_t i = 0; i < states.size(); ++i) {
    ASSIGN_OR_RETURN(auto s, kc::DeviceBuffer<float>::Zeros(per_layer(state_floats)));
    ASSIGN_OR_RETURN(auto w, kc::DeviceBuffer<float>::Zeros(per_layer(window_floats)));
    *total += static_cast<int64_t>(s.bytes() + w.bytes());
    column_states.push_back(s.data());
    column_windows.push_back(w.data());
    column_states_.push_back(std::move(s));
    column_windows_.push_back(std::move(w));
  }
  ASSIGN_OR_RETURN(state_ptrs_, kc::DeviceBuffer<float*>::FromHost(std::span<float* const>(states)));
  ASSIGN_OR_RETURN(window_ptrs_, kc::DeviceBuffer<float*>::FromHost(std::span<float* const>(windows)));
  ASSIGN_OR_RETURN(column_state_ptrs_, kc::DeviceBuffer<float*>::FromHost(std::span<float* const>(column_states)));
  ASSIGN_OR_RETURN(column_window_ptrs_, kc::DeviceBuffer<float*>::FromHost(std::span<float* const>(column_windows)));
  layers_.state = state_ptrs_.data();
  layers_.column_state = column_state_ptrs_.data();
  layers_.window = window_ptrs_.data();
  layers_.column_window = column_window_ptrs_.data();
  layers_.num_layers = static_cast<int>(states.size());
  layers_.state_floats = state_floats;
  layers_.window_floats = window_floats;
  layers_.max_columns = max_columns;
  CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&staging_host_), sizeof(int32_t) * 2 * num_slots));
  ASSIGN_OR_RETURN(staging_device_, kc::DeviceBuffer<int32_t>::Zeros(static_cast<size_t>(2 * num_slots)));
  return absl::OkStatus();
}

absl::Status VerifyColumns::Check(const std::vector<ColumnCommit>& commits) const {
  for (const ColumnCommit& c : commits) {
    const int32_t pending = pending_[static_cast<size_t>(c.slot)];
    if (pending == 0) {
      return absl::FailedPreconditionError(
          fmt::format("column commit: slot {} has no verify forward (keep_column_states) pending", c.slot));
    }
    if (c.accepted > pending) {
      return absl::InvalidArgumentError(
          fmt::format("column commit: slot {} accepted {} of {} verified columns", c.slot, c.accepted, pending));
    }
  }
  return absl::OkStatus();
}

absl::Status VerifyColumns::Commit(const std::vector<ColumnCommit>& commits, cudaStream_t stream) {
  if (commits.empty()) return absl::OkStatus();
  const int n = static_cast<int>(commits.size());
  const int S = static_cast<int>(pending_.size());
  for (int i = 0; i < n; ++i) {
    staging_host_[i] = commits[static_cast<size_t>(i)].slot;
    staging_host_[S + i] = commits[static_cast<size_t>(i)].accepted - 1;
    pending_[static_cast<size_t>(commits[static_cast<size_t>(i)].slot)] = 0;
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging_device_.data(), staging_host_, sizeof(int32_t) * 2 * S,
                                       cudaMemcpyHostToDevice, stream));
  return kc::CommitColumns(layers_, staging_device_.data(), staging_device_.data() + S, n, stream);
}

void VerifyColumns::AfterForward(const StepPlan& plan) {
  for (const SeqWork& s : plan.seqs) {
    pending_[static_cast<size_t>(s.slot)] = s.keep_column_states && max_columns_ > 1 ? s.num_tokens() : 0;
  }
}

}  // namespace sparkserve::model::cuda
