// DeviceSampler: packing RowSamplings for the GPU sampler, launching it, reading results back.
#include "model/cuda/device_sampler.h"

#include <algorithm>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampling.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

absl::StatusOr<std::unique_ptr<DeviceSampler>> DeviceSampler::Create(int max_rows, int64_t max_vocab) {
  if (max_rows < 1 || max_vocab < 1) {
    return absl::InvalidArgumentError(
        fmt::format("device sampler: rows ({}) and vocab ({}) must be >= 1", max_rows, max_vocab));
  }
  std::unique_ptr<DeviceSampler> s(new DeviceSampler());
  s->max_rows_ = max_rows;
  s->max_vocab_ = max_vocab;
  const size_t n = static_cast<size_t>(max_rows);
  ASSIGN_OR_RETURN(s->params_, kc::DeviceBuffer<uint8_t>::Allocate(n * sizeof(kc::SamplingRow)));
  ASSIGN_OR_RETURN(s->ids_, kc::DeviceBuffer<int32_t>::Allocate(n));
  ASSIGN_OR_RETURN(s->status_, kc::DeviceBuffer<int32_t>::Allocate(n));
  ASSIGN_OR_RETURN(s->logprobs_, kc::DeviceBuffer<float>::Allocate(n));
  ASSIGN_OR_RETURN(s->top_ids_, kc::DeviceBuffer<int32_t>::Allocate(n * kc::kMaxGpuLogprobs));
  ASSIGN_OR_RETURN(s->top_logprobs_, kc::DeviceBuffer<float>::Allocate(n * kc::kMaxGpuLogprobs));
  ASSIGN_OR_RETURN(s->workspace_, kc::DeviceBuffer<uint8_t>::Allocate(
                                      std::max<size_t>(1, kc::SampleWorkspaceBytes(max_rows, static_cast<int>(max_vocab)))));
  CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s->host_ids_), n * sizeof(int32_t)));
  CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s->host_status_), n * sizeof(int32_t)));
  CUDA_RETURN_IF_ERROR(cudaMallocHost(reinterpret_cast<void**>(&s->host_logprobs_), n * sizeof(float)));
  CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&s->host_top_ids_), n * kc::kMaxGpuLogprobs * sizeof(int32_t)));
  CUDA_RETURN_IF_ERROR(
      cudaMallocHost(reinterpret_cast<void**>(&s->host_top_logprobs_), n * kc::kMaxGpuLogprobs * sizeof(float)));
  return s;
}

DeviceSampler::~DeviceSampler() {
  for (void* p : {static_cast<void*>(host_ids_), static_cast<void*>(host_status_), static_cast<void*>(host_logprobs_),
                  static_cast<void*>(host_top_ids_), static_cast<void*>(host_top_logprobs_)}) {
    if (p != nullptr) cudaFreeHost(p);
  }
}

absl::Status DeviceSampler::Upload(std::span<const RowSampling> rows, cudaStream_t stream) {
  const int R = static_cast<int>(rows.size());
  if (R > max_rows_) {
    return absl::InvalidArgumentError(fmt::format("device sampler: {} rows, room for {}", R, max_rows_));
  }
  // Parameters and the sparse lists, packed: ints = banned | bias ids | history ids | history counts.
  std::vector<kc::SamplingRow> params(static_cast<size_t>(R));
  std::vector<int32_t> banned, bias_ids, history_ids, history_counts;
  std::vector<float> bias_values;
  num_logprobs_.assign(static_cast<size_t>(R), -1);
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
    num_logprobs_[static_cast<size_t>(r)] = in.num_logprobs;
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
  if (ints_.size() < ints.size()) {
    ASSIGN_OR_RETURN(ints_, kc::DeviceBuffer<int32_t>::Allocate(ints.size() * 2));
  }
  if (floats_.size() < bias_values.size()) {
    ASSIGN_OR_RETURN(floats_, kc::DeviceBuffer<float>::Allocate(bias_values.size() * 2));
  }
  if (R > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_.data(), params.data(), params.size() * sizeof(kc::SamplingRow),
                                         cudaMemcpyHostToDevice, stream));
  }
  if (!ints.empty()) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(ints_.data(), ints.data(), ints.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  }
  if (!bias_values.empty()) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(floats_.data(), bias_values.data(), bias_values.size() * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
  }
  rows_ = R;
  banned_n_ = banned.size();
  bias_n_ = bias_ids.size();
  history_n_ = history_ids.size();
  return absl::OkStatus();
}

namespace {

kc::SamplingInputs Inputs(const float* logits, int rows, int vocab, const uint8_t* params, const int32_t* ints,
                          const float* floats, size_t banned, size_t bias, size_t history) {
  kc::SamplingInputs in;
  in.logits = logits;
  in.rows = rows;
  in.vocab = vocab;
  in.params = reinterpret_cast<const kc::SamplingRow*>(params);
  in.banned_ids = ints;
  in.bias_ids = ints + banned;
  in.bias_values = floats;
  in.history_ids = ints + banned + bias;
  in.history_output_counts = ints + banned + bias + history;
  return in;
}

}  // namespace

absl::Status DeviceSampler::Sample(const float* logits, int vocab, const int32_t* id_map, cudaStream_t stream) {
  if (vocab > max_vocab_) {
    return absl::InvalidArgumentError(fmt::format("device sampler: rows of {} logits, room for {}", vocab, max_vocab_));
  }
  kc::SamplingInputs in =
      Inputs(logits, rows_, vocab, params_.data(), ints_.data(), floats_.data(), banned_n_, bias_n_, history_n_);
  in.id_map = id_map;
  kc::SamplingOutputs o;
  o.ids = ids_.data();
  o.logprobs = logprobs_.data();
  o.top_ids = top_ids_.data();
  o.top_logprobs = top_logprobs_.data();
  o.status = status_.data();
  return kc::Sample(in, o, workspace_.data(), stream);
}

absl::Status DeviceSampler::ReserveCandidates(int world, int k) {
  if (world < 1 || k < 1 || int64_t{world} * k > max_vocab_) {
    return absl::InvalidArgumentError(fmt::format(
        "device sampler: {} ranks of {} candidates per row, room for candidate rows of {}", world, k, max_vocab_));
  }
  if (world <= candidate_world_ && k <= candidate_k_) return absl::OkStatus();
  const size_t R = static_cast<size_t>(max_rows_), W = static_cast<size_t>(std::max(world, candidate_world_)),
               K = static_cast<size_t>(std::max(k, candidate_k_));
  ASSIGN_OR_RETURN(local_, kc::DeviceBuffer<float>::Zeros(R * 2 * K));
  ASSIGN_OR_RETURN(gathered_, kc::DeviceBuffer<float>::Zeros(W * R * 2 * K));
  ASSIGN_OR_RETURN(candidate_values_, kc::DeviceBuffer<float>::Zeros(R * W * K));
  ASSIGN_OR_RETURN(candidate_ids_, kc::DeviceBuffer<int32_t>::Zeros(R * W * K));
  candidate_world_ = static_cast<int>(W);
  candidate_k_ = static_cast<int>(K);
  return absl::OkStatus();
}

absl::Status DeviceSampler::SelectCandidates(const float* logits, int vocab, int id_begin, int k, cudaStream_t stream) {
  if (vocab > max_vocab_) {
    return absl::InvalidArgumentError(fmt::format("device sampler: rows of {} logits, room for {}", vocab, max_vocab_));
  }
  if (k > candidate_k_) {
    return absl::FailedPreconditionError(fmt::format("device sampler: {} candidates, {} reserved", k, candidate_k_));
  }
  const kc::SamplingInputs in =
      Inputs(logits, rows_, vocab, params_.data(), ints_.data(), floats_.data(), banned_n_, bias_n_, history_n_);
  return kc::SelectCandidates(in, id_begin, k, local_.data(), workspace_.data(), stream);
}

absl::Status DeviceSampler::SampleCandidates(int world, int k, cudaStream_t stream) {
  if (world > candidate_world_ || k > candidate_k_) {
    return absl::FailedPreconditionError(fmt::format("device sampler: {} ranks of {} candidates, {} of {} reserved",
                                                     world, k, candidate_world_, candidate_k_));
  }
  // Rank q's block of the gather is [rows, 2k]: each row's values then its ids.
  const size_t R = static_cast<size_t>(rows_), K = static_cast<size_t>(k), W = static_cast<size_t>(world);
  const size_t block = R * 2 * K;
  const size_t src_pitch = sizeof(float) * 2 * K, dst_pitch = sizeof(float) * W * K, width = sizeof(float) * K;
  for (size_t q = 0; q < W && R > 0; ++q) {
    const float* b = gathered_.data() + q * block;
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(candidate_values_.data() + q * K, dst_pitch, b, src_pitch, width, R,
                                           cudaMemcpyDeviceToDevice, stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(candidate_ids_.data() + q * K, dst_pitch, b + K, src_pitch, width, R,
                                           cudaMemcpyDeviceToDevice, stream));
  }
  return Sample(candidate_values_.data(), world * k, candidate_ids_.data(), stream);
}

absl::Status DeviceSampler::EnqueueResults(cudaStream_t stream) {
  const size_t R = static_cast<size_t>(rows_);
  if (R == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_ids_, ids_.data(), R * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_status_, status_.data(), R * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  if (std::any_of(num_logprobs_.begin(), num_logprobs_.end(), [](int32_t k) { return k >= 0; })) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_logprobs_, logprobs_.data(), R * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_top_ids_, top_ids_.data(), R * kc::kMaxGpuLogprobs * sizeof(int32_t),
                                         cudaMemcpyDeviceToHost, stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_top_logprobs_, top_logprobs_.data(),
                                         R * kc::kMaxGpuLogprobs * sizeof(float), cudaMemcpyDeviceToHost, stream));
  }
  return absl::OkStatus();
}

std::vector<SampledRow> DeviceSampler::Results() const {
  std::vector<SampledRow> out(static_cast<size_t>(rows_));
  for (int r = 0; r < rows_; ++r) {
    SampledRow& s = out[static_cast<size_t>(r)];
    s.status = static_cast<SampledRow::Status>(host_status_[r]);
    s.id = host_ids_[r];
    const int k = num_logprobs_[static_cast<size_t>(r)];
    if (k >= 0 && s.status == SampledRow::kDone) {
      s.logprob = host_logprobs_[r];
      for (int j = 0; j < std::min(k, kc::kMaxGpuLogprobs); ++j) {
        s.top_logprobs.emplace_back(host_top_ids_[static_cast<size_t>(r) * kc::kMaxGpuLogprobs + j],
                                    host_top_logprobs_[static_cast<size_t>(r) * kc::kMaxGpuLogprobs + j]);
      }
    }
  }
  return out;
}

}  // namespace sparkserve::model::cuda
