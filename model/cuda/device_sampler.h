// DeviceSampler: the buffers and host packing around kernels/cuda/sampling.h for one runner:
// RowSamplings uploaded (parameters and the sparse banned / bias / history lists), the sampler or a
// rank's candidate selection launched on a stream, and the results copied back through pinned
// memory as SampledRows once the caller has waited for the stream.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/device_buffer.h"
#include "model/row_sampling.h"

namespace sparkserve::model::cuda {

class DeviceSampler {
 public:
  // Room for up to `max_rows` rows of up to `max_vocab` logits.
  static absl::StatusOr<std::unique_ptr<DeviceSampler>> Create(int max_rows, int64_t max_vocab);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // The rows' parameters and lists (ids as given), copied to the device on `stream`.
  absl::Status Upload(std::span<const RowSampling> rows, cudaStream_t stream);
  // The sampler over logits [rows, vocab] of the uploaded rows; with `id_map` ([rows, vocab]) the
  // reported ids are the map's entries.
  absl::Status Sample(const float* logits, int vocab, const int32_t* id_map, cudaStream_t stream);
  // Split-vocabulary sampling (model/split_vocab_sampling.h), in three calls around the exchange:
  //   ReserveCandidates(world, k); Upload(rows restricted to the slice); SelectCandidates(...) into
  //   local_candidates(); the collective gathers every rank's local_candidates() (rows * 2k floats
  //   each) into gathered_candidates(); Upload(candidate rows); SampleCandidates(world, k).
  absl::Status ReserveCandidates(int world, int k);
  float* local_candidates() { return local_.data(); }        // [rows, 2k]: values | id bits per row
  float* gathered_candidates() { return gathered_.data(); }  // [world, rows * 2k] rank-major
  // This rank's candidates (kernels::cuda::SelectCandidates) of its slice logits [rows, vocab],
  // whose column 0 is token id_begin, into local_candidates().
  absl::Status SelectCandidates(const float* logits, int vocab, int id_begin, int k, cudaStream_t stream);
  // The uploaded rows sampled over their candidate rows: rank q's values (ids) of a row at columns
  // [q k, (q + 1) k) of a row of world * k, from gathered_candidates(); ids reported as global ids.
  absl::Status SampleCandidates(int world, int k, cudaStream_t stream);
  // Copies Sample's results to pinned host memory on `stream` (logprobs when a row asked for them).
  absl::Status EnqueueResults(cudaStream_t stream);
  // After the stream has been waited for: one SampledRow per uploaded row.
  std::vector<SampledRow> Results() const;

 private:
  DeviceSampler() = default;
  int max_rows_ = 0;
  int64_t max_vocab_ = 0;
  int rows_ = 0;
  std::vector<int32_t> num_logprobs_;  // per uploaded row
  size_t banned_n_ = 0, bias_n_ = 0, history_n_ = 0;
  kernels::cuda::DeviceBuffer<uint8_t> params_;  // [max_rows] kernels::cuda::SamplingRow
  kernels::cuda::DeviceBuffer<int32_t> ints_;    // banned | bias ids | history ids | history counts
  kernels::cuda::DeviceBuffer<float> floats_;    // bias values
  kernels::cuda::DeviceBuffer<int32_t> ids_, status_, top_ids_;  // [max_rows], [max_rows, 20]
  kernels::cuda::DeviceBuffer<float> logprobs_, top_logprobs_;
  kernels::cuda::DeviceBuffer<uint8_t> workspace_;
  // Split-vocabulary candidates, for world_ * k_ per row (ReserveCandidates).
  int candidate_world_ = 0, candidate_k_ = 0;
  kernels::cuda::DeviceBuffer<float> local_, gathered_, candidate_values_;  // see above; [rows, world * k]
  kernels::cuda::DeviceBuffer<int32_t> candidate_ids_;                       // [rows, world * k]
  // Pinned copies of the results.
  int32_t* host_ids_ = nullptr;
  int32_t* host_status_ = nullptr;
  int32_t* host_top_ids_ = nullptr;
  float* host_logprobs_ = nullptr;
  float* host_top_logprobs_ = nullptr;
};

}  // namespace sparkserve::model::cuda
