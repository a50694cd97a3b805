// CudaModelRunner::SampleOnDevice: a step's logit rows sampled on the GPU (kernels/cuda/sampling.h)
// with only ids and requested logprobs copied back; rows the device does not finish go to the host.
// With tensor parallelism, over the vocabulary split across the ranks (model/split_vocab_sampling.h):
// each rank's best candidates, or the gathered whole rows.
#include <algorithm>
#include <vector>

#include "core/status.h"
#include "fmt/format.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/sampling.h"
#include "model/cuda/cuda_model_runner.h"
#include "model/split_vocab_sampling.h"

namespace sparkserve::model::cuda {
namespace kc = kernels::cuda;

static_assert(kMaxSplitCandidates == kc::kMaxGpuCandidates, "split sampling's candidate cap is the GPU sampler's");

absl::Status CudaModelRunner::EnsureSampler() {
  if (sampler_) return absl::OkStatus();
  // Whole rows, or (split vocabulary) candidate rows of up to world * kMaxSplitCandidates.
  const int64_t vocab = std::max<int64_t>(config_.vocab_size, int64_t{plan_.world} * kMaxSplitCandidates);
  ASSIGN_OR_RETURN(sampler_, DeviceSampler::Create(logit_chunk_rows_, vocab));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::ReturnHostRows(const float* logits, StepOutput* out) {
  const int64_t V = config_.vocab_size;
  const int R = static_cast<int>(out->sampled.size());
  bool host_rows = false;
  for (const SampledRow& s : out->sampled) host_rows = host_rows || s.status != SampledRow::kDone;
  if (!host_rows) return absl::OkStatus();
  out->logits = core::Tensor::Empty({R, V}, core::DType::kF32);
  for (int r = 0; r < R; ++r) {
    if (out->sampled[static_cast<size_t>(r)].status == SampledRow::kDone) continue;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out->logits.data<float>() + static_cast<int64_t>(r) * V,
                                         logits + static_cast<int64_t>(r) * V, sizeof(float) * V,
                                         cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::SampleOnDevice(const std::vector<RowSampling>& rows, const TokenMasks& masks,
                                             StepOutput* out) {
  if (rows.empty()) return Sync();
  RETURN_IF_ERROR(EnsureSampler());
  RETURN_IF_ERROR(ApplyTokenMasks(rows, masks));  // structured outputs: before anything reads the logits
  if (tp()) return SampleSplit(rows, out);
  RETURN_IF_ERROR(sampler_->Upload(rows, stream_));
  RETURN_IF_ERROR(sampler_->Sample(logits_.data(), static_cast<int>(config_.vocab_size), nullptr, stream_));
  RETURN_IF_ERROR(sampler_->EnqueueResults(stream_));
  RETURN_IF_ERROR(Sync());
  out->sampled = sampler_->Results();
  return ReturnHostRows(logits_.data(), out);  // rows the device left: their logits for the host sampler
}

absl::Status CudaModelRunner::SampleSplit(const std::vector<RowSampling>& rows, StepOutput* out) {
  const int R = static_cast<int>(rows.size());
  const int64_t V = config_.vocab_size;
  const SplitSamplingPlan split = PlanSplitSampling(rows, V);
  if (!split.candidates) {  // whole rows on every rank, sampled as one GPU does
    RETURN_IF_ERROR(GatherLogits(R));
    RETURN_IF_ERROR(sampler_->Upload(rows, stream_));
    RETURN_IF_ERROR(sampler_->Sample(full_logits_.data(), static_cast<int>(V), nullptr, stream_));
    RETURN_IF_ERROR(sampler_->EnqueueResults(stream_));
    RETURN_IF_ERROR(Sync());
    out->sampled = sampler_->Results();
    return ReturnHostRows(full_logits_.data(), out);
  }
  const int W = plan_.world, k = split.k;
  RETURN_IF_ERROR(sampler_->ReserveCandidates(W, k));  // kept for later steps of no larger k
  // This rank's slice: its lists restricted to it, its best candidates.
  std::vector<RowSampling> local;
  local.reserve(rows.size());
  for (const RowSampling& r : rows) local.push_back(RestrictToSlice(r, shapes_.vocab));
  const int Vr = static_cast<int>(shapes_.vocab.second - shapes_.vocab.first);
  RETURN_IF_ERROR(sampler_->Upload(local, stream_));
  RETURN_IF_ERROR(sampler_->SelectCandidates(logits_.data(), Vr, static_cast<int>(shapes_.vocab.first), k, stream_));
  // Every rank's candidates, then the candidate rows sampled with the rows' own parameters.
  const size_t per_rank = static_cast<size_t>(R) * 2 * static_cast<size_t>(k);
  RETURN_IF_ERROR(
      collective_->AllGatherDevice(sampler_->local_candidates(), per_rank, sampler_->gathered_candidates(), stream_));
  std::vector<RowSampling> merged;
  merged.reserve(rows.size());
  for (const RowSampling& r : rows) merged.push_back(ForCandidateRow(r));
  RETURN_IF_ERROR(sampler_->Upload(merged, stream_));
  RETURN_IF_ERROR(sampler_->SampleCandidates(W, k, stream_));
  RETURN_IF_ERROR(sampler_->EnqueueResults(stream_));
  RETURN_IF_ERROR(Sync());
  out->sampled = sampler_->Results();
  // A row the candidates could not finish (no finite logit, NaN) fails on the host as TP=1's does:
  // every rank saw the same statuses, so all of them gather the whole rows here.
  const bool host_rows = std::any_of(out->sampled.begin(), out->sampled.end(),
                                     [](const SampledRow& s) { return s.status != SampledRow::kDone; });
  if (!host_rows) return absl::OkStatus();
  RETURN_IF_ERROR(GatherLogits(R));
  RETURN_IF_ERROR(Sync());
  return ReturnHostRows(full_logits_.data(), out);
}

}  // namespace sparkserve::model::cuda
