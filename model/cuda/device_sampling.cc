// CudaModelRunner::SampleOnDevice: a step's logit rows sampled on the GPU (kernels/cuda/sampling.h)
// with only ids and requested logprobs copied back; rows the device does not finish go to the host.
#include "model/cuda/cuda_model_runner.h"

#include <algorithm>
#include <vector>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampling.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

absl::Status CudaModelRunner::SampleOnDevice(const std::vector<RowSampling>& rows, const TokenMasks& masks,
                                             StepOutput* out) {
  const int R = static_cast<int>(rows.size());
  const int V = static_cast<int>(config_.vocab_size);
  if (R == 0) {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  // Parameters and the sparse lists, packed: ints = banned | bias ids | history ids | history counts.
  std::vector<kc::SamplingRow> params(static_cast<size_t>(R));
  std::vector<int32_t> banned, bias_ids, history_ids, history_counts;
  std::vector<float> bias_values;
  for (int r = 0; r < R; ++r) {
    const RowSampling& in = rows[static_cast<size_t>(r)];
    if (in.history_ids.size() != in.history_output_counts.size()) {
      return absl::InvalidArgumentError("RowSampling: history ids and counts differ in length");
    }
    kc::SamplingRow& p = params[static_cast<size_t>(r)];
    p.temperature = in.temperature;
    p.top_k = in.top_k;
    p.top_p = in.top_p;
    p.min_p = in.min_p;
    p.repetition_penalty = in.repetition_penalty;
    p.frequency_penalty = in.frequency_penalty;
    p.presence_penalty = in.presence_penalty;
    p.num_logprobs = std::min(in.num_logprobs, kc::kMaxGpuLogprobs);
    p.uniform = in.uniform;
    p.banned_begin = static_cast<int32_t>(banned.size());
    banned.insert(banned.end(), in.banned.begin(), in.banned.end());
    p.banned_end = static_cast<int32_t>(banned.size());
    p.bias_begin = static_cast<int32_t>(bias_ids.size());
    for (const auto& [id, b] : in.bias) {
      bias_ids.push_back(id);
      bias_values.push_back(b);
    }
    p.bias_end = static_cast<int32_t>(bias_ids.size());
    p.history_begin = static_cast<int32_t>(history_ids.size());
    history_ids.insert(history_ids.end(), in.history_ids.begin(), in.history_ids.end());
    history_counts.insert(history_counts.end(), in.history_output_counts.begin(), in.history_output_counts.end());
    p.history_end = static_cast<int32_t>(history_ids.size());
  }
  std::vector<int32_t> ints;
  ints.reserve(banned.size() + bias_ids.size() + 2 * history_ids.size());
  for (const auto* part : {&banned, &bias_ids, &history_ids, &history_counts}) ints.insert(ints.end(), part->begin(), part->end());
  if (sampling_ints_.size() < ints.size()) {
    ASSIGN_OR_RETURN(sampling_ints_, DeviceBuffer<int32_t>::Allocate(ints.size() * 2));
  }
  if (sampling_floats_.size() < bias_values.size()) {
    ASSIGN_OR_RETURN(sampling_floats_, DeviceBuffer<float>::Allocate(bias_values.size() * 2));
  }
  if (sampling_rows_.size() == 0) {
    const size_t n = static_cast<size_t>(logit_chunk_rows_);
    ASSIGN_OR_RETURN(sampling_rows_, DeviceBuffer<uint8_t>::Allocate(n * sizeof(kc::SamplingRow)));
    ASSIGN_OR_RETURN(sampled_ids_, DeviceBuffer<int32_t>::Allocate(n));
    ASSIGN_OR_RETURN(sampled_status_, DeviceBuffer<int32_t>::Allocate(n));
    ASSIGN_OR_RETURN(sampled_logprobs_, DeviceBuffer<float>::Allocate(n));
    ASSIGN_OR_RETURN(sampled_top_ids_, DeviceBuffer<int32_t>::Allocate(n * kc::kMaxGpuLogprobs));
    ASSIGN_OR_RETURN(sampled_top_logprobs_, DeviceBuffer<float>::Allocate(n * kc::kMaxGpuLogprobs));
    ASSIGN_OR_RETURN(sampling_workspace_,
                     DeviceBuffer<uint8_t>::Allocate(std::max<size_t>(1, kc::SampleWorkspaceBytes(logit_chunk_rows_, V))));
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sampling_rows_.data(), params.data(), params.size() * sizeof(kc::SamplingRow),
                                       cudaMemcpyHostToDevice, stream_));
  if (!ints.empty()) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sampling_ints_.data(), ints.data(), ints.size() * sizeof(int32_t),
                                         cudaMemcpyHostToDevice, stream_));
  }
  if (!bias_values.empty()) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sampling_floats_.data(), bias_values.data(), bias_values.size() * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_));
  }
  kc::SamplingInputs in;
  in.logits = logits_.data();
  in.rows = R;
  in.vocab = V;
  in.params = reinterpret_cast<const kc::SamplingRow*>(sampling_rows_.data());
  const int32_t* base = sampling_ints_.data();
  in.banned_ids = base;
  in.bias_ids = base + banned.size();
  in.bias_values = sampling_floats_.data();
  in.history_ids = base + banned.size() + bias_ids.size();
  in.history_output_counts = base + banned.size() + bias_ids.size() + history_ids.size();
  kc::SamplingOutputs o;
  o.ids = sampled_ids_.data();
  o.logprobs = sampled_logprobs_.data();
  o.top_ids = sampled_top_ids_.data();
  o.top_logprobs = sampled_top_logprobs_.data();
  o.status = sampled_status_.data();
  RETURN_IF_ERROR(ApplyTokenMasks(rows, masks));  // structured outputs: before anything reads the logits
  RETURN_IF_ERROR(kc::Sample(in, o, sampling_workspace_.data(), stream_));
  std::vector<int32_t> ids(R), status(R), top_ids(static_cast<size_t>(R) * kc::kMaxGpuLogprobs);
  std::vector<float> logprobs(R), top_lp(static_cast<size_t>(R) * kc::kMaxGpuLogprobs);
  const bool any_logprobs = std::any_of(rows.begin(), rows.end(), [](const RowSampling& r) { return r.num_logprobs >= 0; });
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids.data(), o.ids, R * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(status.data(), o.status, R * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  if (any_logprobs) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logprobs.data(), o.logprobs, R * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(top_ids.data(), o.top_ids, top_ids.size() * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(top_lp.data(), o.top_logprobs, top_lp.size() * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  out->sampled.resize(static_cast<size_t>(R));
  bool host_rows = false;
  for (int r = 0; r < R; ++r) {
    SampledRow& s = out->sampled[static_cast<size_t>(r)];
    s.status = static_cast<SampledRow::Status>(status[r]);
    s.id = ids[r];
    host_rows = host_rows || s.status != SampledRow::kDone;
    const int k = rows[static_cast<size_t>(r)].num_logprobs;
    if (k >= 0 && s.status == SampledRow::kDone) {
      s.logprob = logprobs[r];
      for (int j = 0; j < std::min(k, kc::kMaxGpuLogprobs); ++j) {
        s.top_logprobs.emplace_back(top_ids[static_cast<size_t>(r) * kc::kMaxGpuLogprobs + j],
                                    top_lp[static_cast<size_t>(r) * kc::kMaxGpuLogprobs + j]);
      }
    }
  }
  if (host_rows) {  // rows the device left: their logits for the host sampler
    out->logits = core::Tensor::Empty({R, V}, core::DType::kF32);
    for (int r = 0; r < R; ++r) {
      if (out->sampled[static_cast<size_t>(r)].status == SampledRow::kDone) continue;
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->logits.data<float>() + static_cast<int64_t>(r) * V,
                                           logits_.data() + static_cast<int64_t>(r) * V, sizeof(float) * V,
                                           cudaMemcpyDeviceToHost, stream_));
    }
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  return absl::OkStatus();
}

}  // namespace sparkserve::model::cuda
